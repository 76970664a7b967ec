import { describe, expect, it } from "vitest";
import { isOlderAttempt } from "./leftovers.js";

describe("isOlderAttempt: which leftovers an attempt's start cleans up", () => {
  it("cleans up epochs before its own, and names without a readable epoch", () => {
    const bump = { epoch: 8, epochsOfNewerIncarnations: [] };
    expect(isOlderAttempt(7, bump)).toBe(true);
    expect(isOlderAttempt(1, bump)).toBe(true);
    expect(isOlderAttempt(undefined, bump)).toBe(true);
  });

  it("keeps its own epoch and later ones: a newer process bumped after this attempt (this one is a zombie)", () => {
    const bump = { epoch: 8, epochsOfNewerIncarnations: [] };
    expect(isOlderAttempt(8, bump)).toBe(false);
    expect(isOlderAttempt(9, bump)).toBe(false);
  });

  it("keeps the epochs newer incarnations started before this attempt, and cleans the others", () => {
    // Epoch 5 by incarnation 12, epoch 6 by an older zombie (incarnation 9), this attempt incarnation 10.
    const bump = { epoch: 7, epochsOfNewerIncarnations: [{ from: 5, to: 5 }] };
    expect(isOlderAttempt(5, bump)).toBe(false);
    expect(isOlderAttempt(6, bump)).toBe(true);
    expect(isOlderAttempt(4, bump)).toBe(true);
  });

  it("keeps every epoch of a span", () => {
    const bump = { epoch: 90, epochsOfNewerIncarnations: [{ from: 3, to: 9 }] };
    expect([2, 3, 6, 9, 10].map((epoch) => isOlderAttempt(epoch, bump))).toEqual([
      true,
      false,
      false,
      false,
      true,
    ]);
  });
});
