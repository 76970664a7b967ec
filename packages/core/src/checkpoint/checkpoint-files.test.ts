import { describe, expect, it } from "vitest";
import { CheckpointError, ConfigurationError } from "../errors/onceflow-error.js";
import {
  assertCheckpointName,
  checksumOf,
  compareCheckpoints,
  parseCheckpointMetadata,
  serializeCheckpointMetadata,
  subtaskEntriesOf,
  verifySubtaskStates,
} from "./checkpoint-files.js";
import { createTestCheckpoint } from "./testing/test-checkpoints.js";

function catchError(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe("checksumOf", () => {
  it("is the hex SHA-256", () => {
    expect(checksumOf(Buffer.from("abc"))).toBe(
      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    );
    expect(checksumOf(new Uint8Array(0))).toBe(
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    );
  });
});

describe("subtaskEntriesOf", () => {
  it("describes each buffer, ordered by subtask index", () => {
    const entries = subtaskEntriesOf(
      new Map([
        [2, Buffer.from("cc")],
        [0, Buffer.from("a")],
      ]),
    );
    expect(entries).toEqual([
      { subtaskIndex: 0, stateBytes: 1, sha256: checksumOf(Buffer.from("a")) },
      { subtaskIndex: 2, stateBytes: 2, sha256: checksumOf(Buffer.from("cc")) },
    ]);
  });
});

describe("assertCheckpointName", () => {
  it("accepts job ids and scopes the runtime uses", () => {
    for (const name of ["orders", "all", "subtask-3-of-8", "job_1.v2", "A", "x".repeat(200)]) {
      expect(() => assertCheckpointName("scope", name)).not.toThrow();
    }
  });
  it("rejects anything that is not one safe path segment", () => {
    for (const name of ["", ".", "..", ".tmp-chk-1", "a/b", "../x", "a b", "é", "x".repeat(201)]) {
      expect(() => assertCheckpointName("jobId", name)).toThrow(ConfigurationError);
    }
  });
});

describe("verifySubtaskStates", () => {
  const { metadata, subtaskStates } = createTestCheckpoint({
    jobId: "orders",
    checkpointId: 3,
    states: ["a", "b"],
  });

  it("accepts matching state", () => {
    expect(() => verifySubtaskStates(metadata, subtaskStates)).not.toThrow();
  });

  it("throws with the code asked for and the checkpoint id", () => {
    const damaged = new Map(subtaskStates);
    damaged.set(1, Buffer.from("c"));
    const error = catchError(() => verifySubtaskStates(metadata, damaged, "CHECKPOINT_CORRUPT"));
    expect(error).toBeInstanceOf(CheckpointError);
    expect((error as CheckpointError).code).toBe("CHECKPOINT_CORRUPT");
    expect((error as CheckpointError).checkpointId).toBe(3);
    expect((error as Error).message).toContain("subtask 1");
    expect(() =>
      verifySubtaskStates(metadata, new Map([[0, Buffer.from("a")]]), "CHECKPOINT_FAILED"),
    ).toThrow(/subtask 1 is missing/);
  });

  it("detects an entry listed twice", () => {
    const twice = { ...metadata, subtasks: [metadata.subtasks[0]!, metadata.subtasks[0]!] };
    expect(() => verifySubtaskStates(twice, new Map([[0, Buffer.from("a")]]))).toThrow(/listed twice/);
  });
});

describe("checkpoint metadata JSON", () => {
  const { metadata } = createTestCheckpoint({
    jobId: "orders",
    checkpointId: 3,
    summary: { splits: { "t-0": "12" } },
  });

  it("round-trips as pretty JSON", () => {
    const text = serializeCheckpointMetadata(metadata);
    expect(text).toContain('\n  "jobId": "orders",\n');
    expect(parseCheckpointMetadata(text)).toEqual(metadata);
  });

  it("rejects truncated or malformed metadata as CHECKPOINT_CORRUPT", () => {
    const text = serializeCheckpointMetadata(metadata);
    const bad = [
      text.slice(0, text.length / 2),
      "[]",
      JSON.stringify({ ...metadata, formatVersion: 2 }),
      JSON.stringify({ ...metadata, checkpointId: -1 }),
      JSON.stringify({ ...metadata, parallelism: 0 }),
      JSON.stringify({ ...metadata, summary: null }),
      JSON.stringify({ ...metadata, subtasks: [{ subtaskIndex: 0, stateBytes: 1, sha256: "nothex" }] }),
    ];
    for (const candidate of bad) {
      expect(() => parseCheckpointMetadata(candidate, 3), candidate.slice(0, 40)).toThrow(CheckpointError);
    }
    const error = catchError(() => parseCheckpointMetadata("{", 3));
    expect(error).toBeInstanceOf(CheckpointError);
    expect((error as CheckpointError).code).toBe("CHECKPOINT_CORRUPT");
    expect((error as CheckpointError).checkpointId).toBe(3);
  });
});

describe("compareCheckpoints", () => {
  it("orders by id then scope", () => {
    const list = [
      { checkpointId: 2, scope: "b" },
      { checkpointId: 10, scope: "a" },
      { checkpointId: 2, scope: "a" },
    ].sort(compareCheckpoints);
    expect(list).toEqual([
      { checkpointId: 2, scope: "a" },
      { checkpointId: 2, scope: "b" },
      { checkpointId: 10, scope: "a" },
    ]);
  });
});
