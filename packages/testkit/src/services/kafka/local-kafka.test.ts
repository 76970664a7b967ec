import { describe, expect, it } from "vitest";
import { newKafkaClusterId } from "./local-kafka.js";

describe("newKafkaClusterId", () => {
  it("is 22 URL-safe base64 characters", () => {
    expect(newKafkaClusterId()).toMatch(/^[A-Za-z0-9_-]{22}$/);
  });

  it("redraws an id that starts with '-', which the storage tool would take for an option", () => {
    // 0xf8 encodes to "-" as the first base64url character; the second draw does not.
    const draws = [Buffer.alloc(16, 0xf8), Buffer.alloc(16, 0x01)];
    let calls = 0;
    const id = newKafkaClusterId(() => {
      const next = draws[calls++];
      if (next === undefined) throw new Error("drew more than twice");
      return next;
    });
    expect(Buffer.alloc(16, 0xf8).toString("base64url").startsWith("-")).toBe(true);
    expect(id).toBe(Buffer.alloc(16, 0x01).toString("base64url"));
    expect(calls).toBe(2);
  });
});
