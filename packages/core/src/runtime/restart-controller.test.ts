import { describe, expect, it } from "vitest";
import { ConfigurationError } from "../errors/onceflow-error.js";
import { RestartController } from "./restart-controller.js";

describe("RestartController", () => {
  it("exponential-delay grows by the multiplier up to the maximum, and resets after a quiet period", () => {
    const controller = new RestartController({
      type: "exponential-delay",
      initialDelay: 100,
      maxDelay: 300,
      multiplier: 2,
      resetAfter: 10_000,
    });
    expect([0, 1, 2, 3].map((at) => controller.onFailure(at))).toEqual([100, 200, 300, 300]);
    expect(controller.onFailure(20_000)).toBe(100);
  });

  it("exponential-delay defaults to Flink's 1 s initial, ×1.5, 1 min max", () => {
    const controller = new RestartController({ type: "exponential-delay" });
    const delays = Array.from({ length: 12 }, (_, index) => controller.onFailure(index));
    expect(delays.slice(0, 3)).toEqual([1000, 1500, 2250]);
    expect(delays.at(-1)).toBe(60_000);
  });

  it("exponential-delay gives up after maxAttempts", () => {
    const controller = new RestartController({ type: "exponential-delay", initialDelay: 1, maxAttempts: 2 });
    expect([controller.onFailure(0), controller.onFailure(1), controller.onFailure(2)]).toEqual([
      1,
      1.5,
      undefined,
    ]);
  });

  it("fixed-delay restarts `attempts` times", () => {
    const controller = new RestartController({ type: "fixed-delay", attempts: 2, delay: 50 });
    expect([controller.onFailure(0), controller.onFailure(1), controller.onFailure(2)]).toEqual([
      50,
      50,
      undefined,
    ]);
  });

  it("failure-rate gives up when more than maxFailures fall within the interval", () => {
    const controller = new RestartController({
      type: "failure-rate",
      maxFailures: 2,
      interval: 1000,
      delay: 10,
    });
    expect(controller.onFailure(0)).toBe(10);
    expect(controller.onFailure(500)).toBe(10);
    expect(controller.onFailure(1600)).toBe(10); // the failures at 0 and 500 left the window
    expect(controller.onFailure(1700)).toBe(10);
    expect(controller.onFailure(1800)).toBeUndefined(); // three within one second
  });

  it("none never restarts", () => {
    expect(new RestartController({ type: "none" }).onFailure(0)).toBeUndefined();
  });

  it("rejects nonsense settings with the setting's name", () => {
    expect(() => new RestartController({ type: "fixed-delay", attempts: -1, delay: 1 })).toThrow(
      ConfigurationError,
    );
    expect(() => new RestartController({ type: "exponential-delay", multiplier: 0.5 })).toThrow(
      /restartStrategy.multiplier/,
    );
    expect(() => new RestartController({ type: "sometimes" } as never)).toThrow(/restartStrategy.type/);
  });
});
