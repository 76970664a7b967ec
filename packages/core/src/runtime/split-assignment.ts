import type { Source, SourceSplit } from "../source/source.js";

/**
 * A stable 32-bit hash of a string (FNV-1a), the same in every process and Node version, so that
 * a split id always maps to the same subtask.
 */
export function stableHash(text: string): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < text.length; index++) {
    hash ^= text.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/** The subtask that reads `split`: the source's own rule, or a stable hash of its id. */
export function assignSplit(
  source: Source<unknown, SourceSplit>,
  split: SourceSplit,
  parallelism: number,
): number {
  const owner = source.assignSplit
    ? source.assignSplit(split, parallelism)
    : stableHash(split.splitId) % parallelism;
  if (!Number.isInteger(owner) || owner < 0 || owner >= parallelism) {
    throw new RangeError(
      `source '${source.name}' assigned split '${split.splitId}' to subtask ${owner} of ${parallelism}`,
    );
  }
  return owner;
}
