/**
 * Which incarnation started each epoch of a (sink, subtask), kept in the epoch row (`bumps`) so that
 * a start can tell the leftovers of older attempts (rolled back) from those of newer incarnations
 * (kept: this start is a zombie, and the newer process's stored checkpoint may hold them).
 *
 * The history is a list of epoch ranges, each with the newest incarnation that started an epoch in
 * it and the incarnation series (the checkpoint storage's, see `RuntimeContext.incarnationSeries`).
 * It is bounded without a window: past {@link EPOCH_HISTORY_RANGES} ranges the two oldest are
 * merged into one that keeps the newer incarnation. A merged range can only make a zombie keep
 * more (an older attempt's leftover, which the next start of a newer incarnation rolls back), never
 * roll back an epoch that a newer incarnation started — however many restarts there were.
 *
 * Incarnation numbers compare only within a series: after a reset of the checkpoint storage the
 * numbers start again at 1, and every epoch of the series before is an older attempt's.
 */

/**
 * Epochs `from`..`to` (inclusive), started by incarnations of `series`, the newest of them `incarnation`.
 * `series` is undefined for ranges recorded without one (by an earlier version, or a context made
 * by hand).
 *
 * @example
 * ```ts
 * const range: EpochRange = { from: 3, to: 9, incarnation: 14, series: "3f9c2a7be1d04c55" };
 * ```
 */
export interface EpochRange {
  readonly from: number;
  readonly to: number;
  readonly incarnation: number;
  readonly series: string | undefined;
}

/**
 * The attempt that starts an epoch: its incarnation, the series, and how to ask the checkpoint
 * storage for its newest incarnation (to place ranges recorded without a series).
 *
 * @example
 * ```ts
 * const attempt: BumpingAttempt = { jobId: "orders", incarnation: 7, series: "3f9c…", newestIncarnation: async () => 7 };
 * ```
 */
export interface BumpingAttempt {
  readonly jobId: string;
  readonly incarnation: number;
  readonly series: string | undefined;
  readonly newestIncarnation: (() => Promise<number>) | undefined;
}

/** How many ranges the history keeps before it merges the oldest two. */
export const EPOCH_HISTORY_RANGES = 64;

/**
 * Reads the `bumps` column: `[from, to, incarnation, series]` ranges, or `[epoch, incarnation]`
 * pairs written by earlier versions (a range of one epoch without series); anything else reads as none.
 *
 * @example
 * ```ts
 * parseEpochHistory([[4, 7], [8, 8, 9, "3f9c"]]); // [{ from: 4, to: 4, incarnation: 7, series: undefined }, { from: 8, to: 8, incarnation: 9, series: "3f9c" }]
 * ```
 */
export function parseEpochHistory(value: unknown): EpochRange[] {
  if (!Array.isArray(value)) return [];
  const ranges: EpochRange[] = [];
  for (const entry of value) {
    if (!Array.isArray(entry) || !entry.slice(0, entry.length === 2 ? 2 : 3).every(Number.isFinite)) continue;
    if (entry.length === 2) {
      ranges.push({ from: entry[0], to: entry[0], incarnation: entry[1], series: undefined });
    } else if (entry.length === 4 && (entry[3] === null || typeof entry[3] === "string")) {
      ranges.push({ from: entry[0], to: entry[1], incarnation: entry[2], series: entry[3] ?? undefined });
    }
  }
  return ranges.sort((left, right) => left.from - right.from);
}

/** The `bumps` column for `ranges`. */
export function serializeEpochHistory(ranges: readonly EpochRange[]): string {
  return JSON.stringify(
    ranges.map((range) => [range.from, range.to, range.incarnation, range.series ?? null]),
  );
}

/**
 * The ranges of `history` that belong to `attempt`'s series: ranges of another series are of a
 * checkpoint storage that was reset since (older attempts, dropped), and ranges without a series
 * belong to it when the storage handed out their incarnation (at most its newest), else they are
 * dropped too. Without a series of its own, the attempt takes every range as its series'.
 *
 * @example
 * ```ts
 * await rangesOfSeries(history, { jobId: "orders", incarnation: 2, series: "b", newestIncarnation: async () => 2 });
 * ```
 */
export async function rangesOfSeries(
  history: readonly EpochRange[],
  attempt: BumpingAttempt,
): Promise<EpochRange[]> {
  if (attempt.series === undefined) return [...history];
  let newest: number | undefined;
  const ours: EpochRange[] = [];
  for (const range of history) {
    if (range.series === attempt.series) {
      ours.push(range);
    } else if (range.series === undefined) {
      // Only a range newer than the attempt needs the storage's word.
      if (range.incarnation > attempt.incarnation)
        newest ??= (await attempt.newestIncarnation?.()) ?? Number.POSITIVE_INFINITY;
      if (range.incarnation <= attempt.incarnation || range.incarnation <= (newest ?? 0)) {
        ours.push({ ...range, series: attempt.series });
      }
    }
  }
  return ours;
}

/**
 * The history after `attempt` started `epoch`: its series' ranges plus the new one, the two oldest
 * merged (keeping the newer incarnation) while there are more than `limit`.
 *
 * @example
 * ```ts
 * recordBump(ours, 12, attempt); // ours + { from: 12, to: 12, incarnation: attempt.incarnation, series: attempt.series }
 * ```
 */
export function recordBump(
  ours: readonly EpochRange[],
  epoch: number,
  attempt: BumpingAttempt,
  limit = EPOCH_HISTORY_RANGES,
): EpochRange[] {
  const ranges = [
    ...ours,
    { from: epoch, to: epoch, incarnation: attempt.incarnation, series: attempt.series },
  ];
  while (ranges.length > Math.max(2, limit)) {
    const [first, second] = ranges as [EpochRange, EpochRange];
    ranges.splice(0, 2, {
      from: first.from,
      to: second.to,
      incarnation: Math.max(first.incarnation, second.incarnation),
      series: first.series,
    });
  }
  return ranges;
}

/**
 * The epoch spans that incarnations newer than `attempt` started (in its series): a start must
 * leave their leftovers alone.
 *
 * @example
 * ```ts
 * newerIncarnationSpans([{ from: 5, to: 5, incarnation: 12, series: "a" }], { ...attempt, incarnation: 10 }); // [{ from: 5, to: 5 }]
 * ```
 */
export function newerIncarnationSpans(
  ours: readonly EpochRange[],
  attempt: Pick<BumpingAttempt, "incarnation">,
): EpochSpan[] {
  return ours
    .filter((range) => range.incarnation > attempt.incarnation)
    .map((range) => ({ from: range.from, to: range.to }));
}

/**
 * Epochs `from`..`to`, inclusive.
 *
 * @example
 * ```ts
 * const span: EpochSpan = { from: 5, to: 9 };
 * ```
 */
export interface EpochSpan {
  readonly from: number;
  readonly to: number;
}
