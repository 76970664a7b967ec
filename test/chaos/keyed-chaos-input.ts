import type { InputMessage } from "./chaos-input.js";
import type { KeyedChaosEvent, WindowCount } from "./fixtures/chaos-record.js";

// The keyed chaos's input and the answer it must give. Records are skewed over the keys (one hot key
// takes most of them) and each goes to a random partition, so every key is spread over every
// partition: a count kept per partition or per subtask instead of per key is wrong, not only late.
// Event time grows with the id; `partitions` end records, one per partition, come last and carry a
// time past every window, so the watermark fires the last windows.

/** How many keys the keyed input spreads over. */
export const KEYED_CHAOS_KEYS = 16;
/** Event time between two consecutive records, ms. */
const STEP_MS = 10;

/** The input of one keyed chaos run, and the count of every (key, window) it must produce. */
export interface KeyedChaosInput {
  /** Messages to produce: `records` events, then one end record per partition. */
  readonly messages: number;
  message(id: number): InputMessage;
  /** The reference: `key@start` → the number of the key's records in the window starting at `start`. */
  readonly reference: ReadonlyMap<string, number>;
  /** The share of the records that has the hot key. */
  readonly hotShare: number;
}

/** `key@start`, the reference's key for one window count. */
export const windowOf = (row: Pick<WindowCount, "key" | "start">) => `${row.key}@${row.start}`;

/** Draws the input (from the seeded `random`) and computes its reference. */
export function keyedChaosInput(
  random: () => number,
  records: number,
  partitions: number,
  windowMs: number,
): KeyedChaosInput {
  const keys: string[] = [];
  const partitionOf: number[] = [];
  const reference = new Map<string, number>();
  const partitionsOfKey = new Map<string, Set<number>>();
  let hot = 0;
  for (let id = 0; id < records; id++) {
    // 60 % the hot key, the rest skewed again towards the low keys.
    const index = random() < 0.6 ? 0 : 1 + Math.floor((KEYED_CHAOS_KEYS - 1) * random() ** 2);
    if (index === 0) hot++;
    const key = `k${index}`;
    const partition = Math.floor(random() * partitions);
    keys.push(key);
    partitionOf.push(partition);
    const start = Math.floor((id * STEP_MS) / windowMs) * windowMs;
    reference.set(windowOf({ key, start }), (reference.get(windowOf({ key, start })) ?? 0) + 1);
    const seen = partitionsOfKey.get(key) ?? new Set<number>();
    seen.add(partition);
    partitionsOfKey.set(key, seen);
  }
  // The point of the input: a key with more than a few records is in more than one partition.
  for (const [key, seen] of partitionsOfKey) {
    const count = keys.filter((other) => other === key).length;
    if (partitions > 1 && count >= 20 && seen.size < 2)
      throw new Error(`the input keeps ${key}'s ${count} records in one partition: use another seed`);
  }
  const endAt = records * STEP_MS + 2 * windowMs;
  return {
    messages: records + partitions,
    message(id) {
      if (id >= records) {
        const event: KeyedChaosEvent = { id, key: "end", at: endAt, end: true };
        return { key: "end", value: JSON.stringify(event), partition: id - records };
      }
      const event: KeyedChaosEvent = { id, key: keys[id] as string, at: id * STEP_MS };
      return { key: event.key, value: JSON.stringify(event), partition: partitionOf[id] as number };
    },
    reference,
    hotShare: records === 0 ? 0 : hot / records,
  };
}

/**
 * Compares what the independent reader found with the reference: every (key, window) once, with the
 * reference's count. Returns the violations (empty when right), a few of each kind.
 */
export function windowCountViolations(
  rows: readonly WindowCount[],
  reference: ReadonlyMap<string, number>,
): string[] {
  const found = new Map<string, number[]>();
  for (const row of rows) {
    const counts = found.get(windowOf(row)) ?? [];
    counts.push(Number(row.count));
    found.set(windowOf(row), counts);
  }
  const doubled: string[] = [];
  const wrong: string[] = [];
  const unknown: string[] = [];
  const missing: string[] = [];
  for (const [window, counts] of found) {
    const expected = reference.get(window);
    if (expected === undefined) unknown.push(`${window}=${counts.join("+")}`);
    else if (counts.length > 1) doubled.push(`${window}=${counts.join("+")} (expected ${expected})`);
    else if (counts[0] !== expected) wrong.push(`${window}=${counts[0]} (expected ${expected})`);
  }
  for (const [window, expected] of reference)
    if (!found.has(window)) missing.push(`${window} (expected ${expected})`);
  const describe = (what: string, list: string[]) =>
    list.length === 0
      ? []
      : [`${list.length} ${what}: ${list.slice(0, 8).join(", ")}${list.length > 8 ? ", …" : ""}`];
  return [
    ...describe("windows written more than once", doubled),
    ...describe("windows with a wrong count", wrong),
    ...describe("windows missing", missing),
    ...describe("windows not in the input", unknown),
  ];
}
