import { describe, expect, it } from "vitest";
import { StageGate } from "./stage-gate.js";

describe("StageGate", () => {
  it("lets one action in at a time and keeps at most one waiting batch per sender", async () => {
    const gate = new StageGate();
    let inside = 0;
    let mostInside = 0;
    const received: number[] = [];
    // Three senders, each awaiting the delivery of its batch before it sends the next one (the
    // channel's backpressure), into a receiver that takes a while per batch.
    const sender = async (id: number): Promise<void> => {
      for (let batch = 0; batch < 200; batch++) {
        await gate.run(async () => {
          inside++;
          mostInside = Math.max(mostInside, inside);
          await new Promise<void>((resolve) => setImmediate(resolve));
          received.push(id);
          inside--;
        });
      }
    };
    await Promise.all([sender(0), sender(1), sender(2)]);
    expect(mostInside).toBe(1);
    expect(received).toHaveLength(600);
    expect(gate.maxWaiting).toBeLessThanOrEqual(2);
  });

  it("runs a synchronous action at once when free, and passes failures on without staying held", async () => {
    let released = 0;
    const gate = new StageGate(() => released++);
    expect(gate.run(() => 42)).toBe(42);
    expect(() =>
      gate.run(() => {
        throw new Error("boom");
      }),
    ).toThrow("boom");
    await expect(gate.run(async () => Promise.reject(new Error("later")))).rejects.toThrow("later");
    expect(await gate.run(async () => "free again")).toBe("free again");
    expect(released).toBe(4);
  });
});
