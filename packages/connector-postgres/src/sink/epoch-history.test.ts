import { describe, expect, it } from "vitest";
import {
  type BumpingAttempt,
  type EpochRange,
  newerIncarnationSpans,
  parseEpochHistory,
  rangesOfSeries,
  recordBump,
  serializeEpochHistory,
} from "./epoch-history.js";

const attempt = (incarnation: number, series: string | undefined, newest?: number): BumpingAttempt => ({
  jobId: "orders",
  incarnation,
  series,
  newestIncarnation: newest === undefined ? undefined : async () => newest,
});

/** Bumps `history` as the epoch row does; returns the new history and what the bump kept. */
async function bump(history: readonly EpochRange[], epoch: number, by: BumpingAttempt) {
  const ours = await rangesOfSeries(history, by);
  return { history: recordBump(ours, epoch, by), kept: newerIncarnationSpans(ours, by) };
}

describe("epoch history", () => {
  it("reads the pairs of earlier versions and writes ranges with their series", () => {
    const history = parseEpochHistory([[4, 7], [5, 6, 9, "a"], "junk", [1]]);
    expect(history).toEqual([
      { from: 4, to: 4, incarnation: 7, series: undefined },
      { from: 5, to: 6, incarnation: 9, series: "a" },
    ]);
    expect(parseEpochHistory(JSON.parse(serializeEpochHistory(history)))).toEqual(history);
  });

  it("a zombie keeps the epoch a newer incarnation started, however many restarts came after it", async () => {
    // The replacement (incarnation 6) prepares in epoch 1; then it crash-loops 100 times (7..106)
    // before the frozen zombie (incarnation 5) starts its sink.
    let { history } = await bump([], 1, attempt(6, "s"));
    for (let incarnation = 7; incarnation <= 106; incarnation++) {
      ({ history } = await bump(history, incarnation - 5, attempt(incarnation, "s")));
    }
    expect(history.length).toBeLessThanOrEqual(64);
    const zombie = await bump(history, 102, attempt(5, "s"));
    expect(zombie.kept.some((span) => span.from <= 1 && 1 <= span.to)).toBe(true);
    // The next start of a newer incarnation keeps nothing: it rolls every older epoch back.
    expect((await bump(zombie.history, 103, attempt(107, "s"))).kept).toEqual([]);
  });

  it("after a checkpoint storage reset (a new series), every epoch of the old series is an older attempt's", async () => {
    const old = (await bump([], 7, attempt(40, "old"))).history;
    const fresh = await bump(old, 8, attempt(1, "new", 1));
    expect(fresh.kept).toEqual([]);
    expect(fresh.history).toEqual([{ from: 8, to: 8, incarnation: 1, series: "new" }]);
  });

  it("places pairs written without a series by the storage's newest incarnation", async () => {
    const legacy = parseEpochHistory([
      [3, 40],
      [4, 2],
    ]);
    // The storage handed out up to 2: incarnation 40 is of a series before a reset.
    expect((await bump(legacy, 5, attempt(1, "s", 2))).kept).toEqual([{ from: 4, to: 4 }]);
    // The storage handed out 40: a newer incarnation of this series started epoch 3.
    expect((await bump(legacy, 5, attempt(1, "s", 40))).kept).toEqual([
      { from: 3, to: 3 },
      { from: 4, to: 4 },
    ]);
  });

  it("without a series (a context made by hand) compares incarnation numbers", async () => {
    const history = (await bump([], 3, attempt(12, undefined))).history;
    expect((await bump(history, 4, attempt(10, undefined))).kept).toEqual([{ from: 3, to: 3 }]);
  });
});
