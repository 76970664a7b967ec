import { describe, expect, it } from "vitest";
import { isOlderAttempt } from "./leftovers.js";

describe("isOlderAttempt: which leftovers an attempt's start cleans up", () => {
  it("cleans up epochs before its own, and names without a readable epoch", () => {
    expect(isOlderAttempt(7, { epoch: 8 })).toBe(true);
    expect(isOlderAttempt(1, { epoch: 8 })).toBe(true);
    expect(isOlderAttempt(undefined, { epoch: 8 })).toBe(true);
  });

  it("keeps its own epoch and later ones: a newer process bumped after this attempt (this one is a zombie)", () => {
    expect(isOlderAttempt(8, { epoch: 8 })).toBe(false);
    expect(isOlderAttempt(9, { epoch: 8 })).toBe(false);
  });

  it("keeps everything when a newer incarnation had bumped before this attempt", () => {
    const bump = { epoch: 8, newerIncarnation: { epoch: 7, incarnation: 12 } };
    expect(isOlderAttempt(7, bump)).toBe(false);
    expect(isOlderAttempt(6, bump)).toBe(false);
    expect(isOlderAttempt(undefined, bump)).toBe(false);
  });
});
