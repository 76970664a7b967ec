import { ConfigurationError, createCompletedCheckpoint } from "@onceflow/core";
import { afterEach, describe, expect, it } from "vitest";
import { type SteppableClock, steppableClock } from "./steppable-clock.js";

const RealDate = Date;
let clock: SteppableClock | undefined;
afterEach(() => {
  clock?.restore();
  clock = undefined;
});

describe("steppableClock", () => {
  it("steps Date.now(), new Date() and Date() back and forward", () => {
    clock = steppableClock();
    const before = RealDate.now();
    clock.step(-3_600_000);
    expect(Date.now()).toBeLessThanOrEqual(before - 3_600_000 + 1_000);
    expect(Date.now()).toBeGreaterThanOrEqual(before - 3_600_000);
    // `new Date()` itself is under test here.
    const constructed = new Date();
    expect(Math.abs(constructed.valueOf() - Date.now())).toBeLessThan(1_000);
    expect(Math.abs(RealDate.parse(Date()) - Date.now())).toBeLessThan(2_000);
    clock.step(7_200_000);
    expect(clock.offset).toBe(3_600_000);
    expect(Date.now() - RealDate.now()).toBeGreaterThanOrEqual(3_600_000 - 5);
    expect(Date.now() - RealDate.now()).toBeLessThanOrEqual(3_600_000 + 5);
  });

  it("sets an absolute time that runs on, and an offset", () => {
    clock = steppableClock({ offset: 5_000 });
    expect(clock.offset).toBe(5_000);
    clock.setTime(1_000_000_000_000);
    const read = Date.now();
    expect(read).toBeGreaterThanOrEqual(1_000_000_000_000);
    expect(read).toBeLessThan(1_000_000_000_000 + 1_000);
    expect(new Date().toISOString().startsWith("2001-09-09")).toBe(true);
    clock.setOffset(0);
    expect(Math.abs(Date.now() - RealDate.now())).toBeLessThan(5);
  });

  it("leaves explicit dates, parsing, instanceof and subclasses alone", () => {
    const madeBefore = new Date(0);
    clock = steppableClock({ offset: -86_400_000 });
    expect(new Date(0).getTime()).toBe(0);
    expect(new Date("2020-01-02T03:04:05Z").toISOString()).toBe("2020-01-02T03:04:05.000Z");
    expect(new Date(2020, 0, 1).getFullYear()).toBe(2020);
    expect(Date.UTC(2020, 0, 1)).toBe(1_577_836_800_000);
    expect(Date.parse("1970-01-01T00:00:01Z")).toBe(1_000);
    expect(madeBefore).toBeInstanceOf(Date);
    expect(new Date()).toBeInstanceOf(RealDate);
    class Stamp extends Date {
      label(): string {
        return `stamp ${this.getTime()}`;
      }
    }
    const stamp = new Stamp();
    expect(stamp).toBeInstanceOf(Stamp);
    expect(stamp).toBeInstanceOf(Date);
    expect(Math.abs(stamp.getTime() - (RealDate.now() - 86_400_000))).toBeLessThan(1_000);
    expect(stamp.label()).toMatch(/^stamp \d+$/);
  });

  it("restores the real Date, idempotently", () => {
    clock = steppableClock({ offset: -1_000_000 });
    expect(Date).not.toBe(RealDate);
    clock.restore();
    clock.restore();
    expect(Date).toBe(RealDate);
    expect(clock.active).toBe(false);
    expect(Math.abs(Date.now() - RealDate.now())).toBeLessThan(5);
  });

  it("allows one clock at a time, and refuses offsets that are not numbers", () => {
    clock = steppableClock();
    expect(() => steppableClock()).toThrow(ConfigurationError);
    expect(() => clock?.step(Number.NaN)).toThrow(/finite number of milliseconds/);
    clock.restore();
    clock = steppableClock();
    expect(clock.active).toBe(true);
  });

  it("is the clock onceflow reads: a checkpoint's timestamps follow it", () => {
    clock = steppableClock({ offset: -3_600_000 });
    const checkpoint = createCompletedCheckpoint({
      jobId: "orders",
      checkpointId: 1,
      scope: "all",
      parallelism: 1,
      subtaskStates: new Map([[0, Buffer.from("s")]]),
    });
    expect(RealDate.now() - checkpoint.metadata.completedAt).toBeGreaterThanOrEqual(3_600_000);
    expect(RealDate.now() - checkpoint.metadata.completedAt).toBeLessThan(3_600_000 + 1_000);
  });

  it("does not move timers: a stepped clock is only the wall clock", async () => {
    clock = steppableClock();
    const started = performance.now();
    clock.step(-10_000);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(performance.now() - started).toBeGreaterThanOrEqual(15);
    expect(performance.now() - started).toBeLessThan(5_000);
  });
});
