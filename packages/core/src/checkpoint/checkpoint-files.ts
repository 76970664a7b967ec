import { createHash } from "node:crypto";
import { CheckpointError, ConfigurationError } from "../errors/onceflow-error.js";
import type { CheckpointMetadata, CompletedCheckpoint, SubtaskStateEntry } from "./checkpoint-storage.js";

/**
 * The hex SHA-256 of some state bytes: the checksum every checkpoint storage writes into
 * {@link SubtaskStateEntry.sha256} and checks on load, so the runtime and all storages agree.
 *
 * @example
 * ```ts
 * checksumOf(Buffer.from("abc")); // "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
 * ```
 */
export function checksumOf(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/**
 * Describes state buffers as metadata entries (size and checksum), ordered by subtask index: what
 * the runtime puts in {@link CheckpointMetadata.subtasks}.
 *
 * @example
 * ```ts
 * const subtasks = subtaskEntriesOf(new Map([[0, Buffer.from("state")]]));
 * // [{ subtaskIndex: 0, stateBytes: 5, sha256: "…" }]
 * ```
 */
export function subtaskEntriesOf(states: ReadonlyMap<number, Uint8Array>): SubtaskStateEntry[] {
  return [...states.entries()]
    .sort(([a], [b]) => a - b)
    .map(([subtaskIndex, bytes]) => ({ subtaskIndex, stateBytes: bytes.length, sha256: checksumOf(bytes) }));
}

// Letters, digits, '.', '_' and '-', not starting with '.', so a name can never be '..' nor clash
// with the storages' own hidden temporary entries.
const SAFE_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}$/;

/**
 * Checks that a job id or a scope can be used as one path segment (and one key in any storage):
 * 1–200 characters of letters, digits, `.`, `_` and `-`, not starting with `.`. Every storage checks
 * the same rule, so a job that works with `memory` in tests also works with `filesystem`.
 *
 * @throws ConfigurationError naming `setting` when the name is not safe.
 * @example
 * ```ts
 * assertCheckpointName("jobId", "orders"); // ok
 * assertCheckpointName("jobId", "../etc"); // throws ConfigurationError
 * ```
 */
export function assertCheckpointName(setting: "jobId" | "scope", name: string): void {
  if (typeof name !== "string" || !SAFE_NAME.test(name)) {
    throw new ConfigurationError(
      setting,
      `${JSON.stringify(name)} cannot be used as a checkpoint path: use 1–200 letters, digits, '.', '_' or '-', not starting with '.'`,
    );
  }
}

/**
 * Checks that a checkpoint id is a non-negative safe integer.
 *
 * @throws ConfigurationError when it is not.
 * @example
 * ```ts
 * assertCheckpointId(12); // ok
 * ```
 */
export function assertCheckpointId(checkpointId: number): void {
  if (!Number.isSafeInteger(checkpointId) || checkpointId < 0) {
    throw new ConfigurationError(
      "checkpointId",
      `must be a non-negative integer, got ${String(checkpointId)}`,
    );
  }
}

/**
 * Checks that the state buffers are exactly the ones the metadata describes: one buffer per entry,
 * none extra, each of the recorded size and SHA-256. Storages call it with `CHECKPOINT_FAILED`
 * before storing (refusing inconsistent input) and with `CHECKPOINT_CORRUPT` after loading.
 *
 * @throws CheckpointError with the given code on the first difference.
 * @example
 * ```ts
 * verifySubtaskStates(checkpoint.metadata, checkpoint.subtaskStates, "CHECKPOINT_CORRUPT");
 * ```
 */
export function verifySubtaskStates(
  metadata: CheckpointMetadata,
  states: ReadonlyMap<number, Uint8Array>,
  code: "CHECKPOINT_FAILED" | "CHECKPOINT_CORRUPT" = "CHECKPOINT_CORRUPT",
): void {
  const problem = subtaskStatesProblem(metadata, states);
  if (problem !== undefined) {
    throw new CheckpointError(code, `${describeCheckpoint(metadata)}: ${problem}`, {
      checkpointId: metadata.checkpointId,
    });
  }
}

function subtaskStatesProblem(
  metadata: CheckpointMetadata,
  states: ReadonlyMap<number, Uint8Array>,
): string | undefined {
  const seen = new Set<number>();
  for (const entry of metadata.subtasks) {
    const index = entry.subtaskIndex;
    if (seen.has(index)) return `subtask ${index} is listed twice in the metadata`;
    seen.add(index);
    const bytes = states.get(index);
    if (bytes === undefined) return `the state of subtask ${index} is missing`;
    if (bytes.length !== entry.stateBytes) {
      return `the state of subtask ${index} has ${bytes.length} bytes, the metadata says ${entry.stateBytes}`;
    }
    if (checksumOf(bytes) !== entry.sha256) return `the state of subtask ${index} fails its SHA-256 check`;
  }
  for (const index of states.keys()) {
    if (!seen.has(index)) return `there is state for subtask ${index} that the metadata does not list`;
  }
  return undefined;
}

/**
 * A short name of a checkpoint for messages: `checkpoint 12 of job orders (scope all)`.
 *
 * @example
 * ```ts
 * describeCheckpoint({ jobId: "orders", scope: "all", checkpointId: 12 });
 * ```
 */
export function describeCheckpoint(at: Pick<CheckpointMetadata, "jobId" | "scope" | "checkpointId">): string {
  return `checkpoint ${at.checkpointId} of job ${at.jobId} (scope ${at.scope})`;
}

/**
 * Writes metadata as the readable, pretty JSON every storage keeps. Storing through JSON in every
 * storage (memory too) means a summary that would not survive the filesystem fails in tests as well.
 *
 * @throws CheckpointError `CHECKPOINT_FAILED` when the metadata cannot be written as JSON (a bigint
 * or a cycle in `summary`).
 * @example
 * ```ts
 * await writeFile("_metadata.json", serializeCheckpointMetadata(checkpoint.metadata));
 * ```
 */
export function serializeCheckpointMetadata(metadata: CheckpointMetadata): string {
  try {
    return `${JSON.stringify(metadata, null, 2)}\n`;
  } catch (cause) {
    throw new CheckpointError(
      "CHECKPOINT_FAILED",
      `${describeCheckpoint(metadata)}: its metadata cannot be written as JSON (summary values must be JSON)`,
      { checkpointId: metadata.checkpointId, cause },
    );
  }
}

/**
 * Reads metadata written by {@link serializeCheckpointMetadata} and checks its shape.
 *
 * @throws CheckpointError `CHECKPOINT_CORRUPT` when the text is not JSON or not checkpoint metadata.
 * @example
 * ```ts
 * const metadata = parseCheckpointMetadata(await readFile("_metadata.json", "utf8"));
 * ```
 */
export function parseCheckpointMetadata(text: string, checkpointId?: number): CheckpointMetadata {
  const corrupt = (problem: string, cause?: unknown): CheckpointError =>
    new CheckpointError(
      "CHECKPOINT_CORRUPT",
      `checkpoint${checkpointId === undefined ? "" : ` ${checkpointId}`} metadata: ${problem}`,
      {
        ...(checkpointId === undefined ? {} : { checkpointId }),
        cause,
      },
    );
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (cause) {
    throw corrupt("not valid JSON (truncated?)", cause);
  }
  const problem = metadataProblem(value);
  if (problem !== undefined) throw corrupt(problem);
  return value as CheckpointMetadata;
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);
const isCount = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0;

function metadataProblem(value: unknown): string | undefined {
  if (!isRecord(value)) return "not a JSON object";
  if (value.formatVersion !== 1) return `unknown formatVersion ${JSON.stringify(value.formatVersion)}`;
  if (typeof value.jobId !== "string" || value.jobId === "") return "jobId is missing";
  if (typeof value.scope !== "string" || value.scope === "") return "scope is missing";
  if (!isCount(value.checkpointId)) return "checkpointId is not a non-negative integer";
  if (typeof value.triggeredAt !== "number" || typeof value.completedAt !== "number") {
    return "triggeredAt/completedAt are not numbers";
  }
  if (!isCount(value.parallelism) || value.parallelism < 1) return "parallelism is not a positive integer";
  if (typeof value.isFinal !== "boolean") return "isFinal is not a boolean";
  if (value.incarnation !== undefined && !isCount(value.incarnation))
    return "incarnation is not a non-negative integer";
  if (value.lineage !== undefined && !isCount(value.lineage)) return "lineage is not a non-negative integer";
  if (value.incarnationScope !== undefined && typeof value.incarnationScope !== "string")
    return "incarnationScope is not a string";
  if (!isRecord(value.summary)) return "summary is not an object";
  if (!Array.isArray(value.subtasks)) return "subtasks is not an array";
  for (const entry of value.subtasks as unknown[]) {
    if (
      !isRecord(entry) ||
      !isCount(entry.subtaskIndex) ||
      !isCount(entry.stateBytes) ||
      typeof entry.sha256 !== "string" ||
      !/^[0-9a-f]{64}$/.test(entry.sha256)
    ) {
      return `bad subtask entry ${JSON.stringify(entry)}`;
    }
  }
  return undefined;
}

/**
 * Checks a checkpoint before it is stored: safe names, a valid id, JSON-able metadata and state
 * buffers that match it. Shared by the storages so they refuse the same inputs.
 *
 * @throws ConfigurationError for an unsafe job id or scope; CheckpointError `CHECKPOINT_FAILED` otherwise.
 * @example
 * ```ts
 * const metadataJson = validateCheckpointForStore(checkpoint);
 * ```
 * @returns the metadata as pretty JSON, ready to write.
 */
export function validateCheckpointForStore(checkpoint: CompletedCheckpoint): string {
  const { metadata } = checkpoint;
  assertCheckpointName("jobId", metadata.jobId);
  assertCheckpointName("scope", metadata.scope);
  assertCheckpointId(metadata.checkpointId);
  const json = serializeCheckpointMetadata(metadata);
  const problem = metadataProblem(JSON.parse(json));
  if (problem !== undefined) {
    throw new CheckpointError("CHECKPOINT_FAILED", `${describeCheckpoint(metadata)}: metadata ${problem}`, {
      checkpointId: metadata.checkpointId,
    });
  }
  verifySubtaskStates(metadata, checkpoint.subtaskStates, "CHECKPOINT_FAILED");
  return json;
}

/**
 * Orders metadata the way {@link CheckpointStorage.list} returns it: by checkpoint id, then scope.
 *
 * @example
 * ```ts
 * const ordered = [...checkpoints].sort(compareCheckpoints);
 * ```
 */
export function compareCheckpoints(
  a: Pick<CheckpointMetadata, "checkpointId" | "scope">,
  b: Pick<CheckpointMetadata, "checkpointId" | "scope">,
): number {
  if (a.checkpointId !== b.checkpointId) return a.checkpointId - b.checkpointId;
  return a.scope < b.scope ? -1 : a.scope > b.scope ? 1 : 0;
}
