import { mkdir, mkdtemp, readdir, readFile, rm, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigurationError } from "../errors/onceflow-error.js";
import { redistributeOperatorState } from "../state/operator-state-store.js";
import { FileSink, type FileSinkOptions, readCommittedFiles } from "./file-sink.js";
import { type HarnessCheckpoint, SinkTestHarness } from "./testing/sink-test-harness.js";

let directory: string;

beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), "onceflow-file-sink-"));
});

afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});

function fileSink(options: Partial<FileSinkOptions<unknown>> = {}, subtaskIndex = 0, parallelism = 1) {
  const sink = new FileSink<unknown>({
    directory,
    commitRetry: { maxAttempts: 2, initialDelay: 1 },
    ...options,
  });
  return { sink, harness: new SinkTestHarness<unknown>(sink, { subtaskIndex, parallelism }) };
}

const committedNames = async () => (await readdir(directory)).filter((name) => !name.startsWith(".")).sort();
const stagingNames = async () => (await readdir(join(directory, ".staging"))).sort();

describe("FileSink", () => {
  it("publishes one file per checkpoint with exactly that checkpoint's records", async () => {
    const { harness } = fileSink();
    await harness.initialize();
    await harness.write({ n: 1 }, { n: 2 });
    await harness.checkpoint(1);
    await harness.write({ n: 3 });
    await harness.checkpoint(2);

    const names = await committedNames();
    expect(names).toHaveLength(2);
    expect(names[0]).toMatch(/^part-0-1-[0-9a-f]{16}\.jsonl$/);
    expect(names[1]).toMatch(/^part-0-2-[0-9a-f]{16}\.jsonl$/);
    expect(await readFile(join(directory, names[0] ?? ""), "utf8")).toBe('{"n":1}\n{"n":2}\n');
    expect(await readCommittedFiles(directory)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    expect(await stagingNames()).toEqual([]); // the open transaction has written nothing yet
  });

  it("keeps pre-committed data in the staging folder, invisible, until the checkpoint completes", async () => {
    const { harness } = fileSink();
    await harness.initialize();
    await harness.write("a", "b");
    await harness.snapshot(1);
    expect(await committedNames()).toEqual([]);
    const staged = await stagingNames();
    expect(staged).toHaveLength(1);
    expect(staged[0]).toMatch(/^part-0-1-i1-[0-9a-f]{16}\.staging$/);
    expect(await readFile(join(directory, ".staging", staged[0] ?? ""), "utf8")).toBe('"a"\n"b"\n');
    await harness.notifyComplete(1);
    expect(await readCommittedFiles(directory)).toEqual(["a", "b"]);
    expect(await stagingNames()).toEqual([]);
  });

  it("names staging files after the checkpoint the transaction began after, plus one", async () => {
    const { harness } = fileSink();
    await harness.initialize();
    await harness.checkpoint(4);
    await harness.write("x");
    await harness.snapshot(6); // checkpoint 5 never reached this subtask
    expect(await stagingNames()).toEqual([expect.stringMatching(/^part-0-5-/)]);
    await harness.notifyComplete(6);
    expect(await committedNames()).toEqual([expect.stringMatching(/^part-0-6-/)]);
  });

  it("publishes nothing for an empty transaction", async () => {
    const { harness } = fileSink();
    await harness.initialize();
    await harness.checkpoint(1);
    await harness.write("only");
    await harness.checkpoint(2);
    await harness.checkpoint(3);
    expect(await committedNames()).toEqual([expect.stringMatching(/^part-0-2-/)]);
    expect(await stagingNames()).toEqual([]);
  });

  it("flushes large transactions to the staging file before pre-commit and keeps every byte", async () => {
    const { harness } = fileSink({ encoder: (value) => `${String(value)}\n` });
    await harness.initialize();
    const line = "x".repeat(1000);
    // About 610 kB: two flushes at 256 kB, the rest still buffered at the barrier.
    const values = Array.from({ length: 610 }, (_, index) => `${index}:${line}`);
    for (let index = 0; index < values.length; index += 50)
      await harness.write(...values.slice(index, index + 50));
    const [staged] = await stagingNames();
    const partial = await readFile(join(directory, ".staging", staged ?? ""), "utf8");
    expect(partial.length).toBeGreaterThan(0);
    expect(partial.length).toBeLessThan(values.join("\n").length + 1);
    await harness.checkpoint(1);
    const lines = await readCommittedFiles<string>(directory, {
      decoder: (content) => content.toString().split("\n").filter(Boolean),
    });
    expect(lines).toEqual(values);
  });

  it("writes through write() per record as well as writeBatch()", async () => {
    const { sink, harness } = fileSink();
    await harness.initialize();
    const context = { timestamp: undefined, currentWatermark: 0, splitId: "0" };
    await sink.write(1, context);
    await sink.write(2, context);
    await harness.checkpoint(1);
    expect(await readCommittedFiles(directory)).toEqual([1, 2]);
  });

  it("uses the encoder, prefix and suffix it is given", async () => {
    const { harness } = fileSink({
      encoder: (value) => Buffer.from(`${(value as { id: number }).id};`),
      filePrefix: "orders",
      fileSuffix: ".csv",
    });
    await harness.initialize();
    await harness.write({ id: 1 }, { id: 2 });
    await harness.checkpoint(1);
    const names = await committedNames();
    expect(names).toEqual([expect.stringMatching(/^orders-0-1-[0-9a-f]{16}\.csv$/)]);
    const decoded = await readCommittedFiles(directory, {
      filePrefix: "orders",
      decoder: (content) => content.toString().split(";").filter(Boolean),
    });
    expect(decoded).toEqual(["1", "2"]);
    expect(await readCommittedFiles(directory, { filePrefix: "other" })).toEqual([]);
  });

  it("deletes the open transaction's staging file on close", async () => {
    const { harness } = fileSink();
    await harness.initialize();
    await harness.write("a");
    await harness.snapshot(1);
    await harness.write("b".repeat(300_000)); // flushed: the staging file of the open transaction exists
    expect(await stagingNames()).toHaveLength(2);
    await harness.close();
    expect(await stagingNames()).toEqual([expect.stringMatching(/^part-0-1-/)]); // the pending one stays
  });

  it("rejects bad settings", () => {
    expect(() => new FileSink({ directory: "" })).toThrow(ConfigurationError);
    expect(() => new FileSink({ directory, filePrefix: "" })).toThrow(/filePrefix/);
    expect(() => new FileSink({ directory, filePrefix: "a/b" })).toThrow(/filePrefix/);
    expect(() => new FileSink({ directory, filePrefix: ".hidden" })).toThrow(/filePrefix/);
    expect(() => new FileSink({ directory, fileSuffix: "/x" })).toThrow(/fileSuffix/);
  });
});

describe("FileSink recovery", () => {
  /** Writes a,b (committed at 1), c (pre-committed at 2, not committed), d (open, flushed); then "crashes". */
  async function crashAfterCheckpoint2(): Promise<{
    checkpoint1: HarnessCheckpoint;
    checkpoint2: HarnessCheckpoint;
  }> {
    const { harness } = fileSink({ encoder: (value) => `${String(value).padEnd(300_000, ".")}\n` });
    await harness.initialize();
    await harness.write("a", "b");
    const checkpoint1 = await harness.checkpoint(1);
    await harness.write("c");
    const checkpoint2 = await harness.snapshot(2);
    await harness.write("d");
    return { checkpoint1, checkpoint2 };
  }

  const decodeSpaced = (content: Buffer) =>
    content
      .toString()
      .split("\n")
      .filter(Boolean)
      .map((line) => line.replace(/\.+$/, ""));

  it("gives every record exactly once after a crash and a restore from the last checkpoint", async () => {
    const { checkpoint2 } = await crashAfterCheckpoint2();
    expect(await stagingNames()).toHaveLength(2); // c (pending) and d (open)

    const restored = fileSink({ encoder: (value) => `${String(value).padEnd(300_000, ".")}\n` });
    await restored.harness.initialize(checkpoint2);
    expect(await stagingNames()).toEqual([]); // c committed, d aborted
    // The source replays from checkpoint 2: d comes again.
    await restored.harness.write("d");
    await restored.harness.write("e");
    await restored.harness.finishAndClose(3);
    expect(await readCommittedFiles(directory, { decoder: decodeSpaced })).toEqual(["a", "b", "c", "d", "e"]);
    expect(await stagingNames()).toEqual([]);
  });

  it("drops what was pre-committed for a checkpoint that was never stored", async () => {
    const { checkpoint1 } = await crashAfterCheckpoint2();
    const restored = fileSink({ encoder: (value) => `${String(value).padEnd(300_000, ".")}\n` });
    await restored.harness.initialize(checkpoint1);
    expect(await stagingNames()).toEqual([]);
    await restored.harness.write("c", "d");
    await restored.harness.finishAndClose(2);
    expect(await readCommittedFiles(directory, { decoder: decodeSpaced })).toEqual(["a", "b", "c", "d"]);
  });

  it("commits idempotently: restoring twice from the same checkpoint publishes the file once", async () => {
    const { harness } = fileSink();
    await harness.initialize();
    await harness.write("a");
    const checkpoint = await harness.snapshot(1);
    await harness.notifyComplete(1); // published; then the process dies before anything else
    for (let attempt = 0; attempt < 2; attempt++) {
      const restored = fileSink();
      await restored.harness.initialize(checkpoint); // would throw COMMIT_FAILED if not idempotent
    }
    expect(await committedNames()).toHaveLength(1);
    expect(await readCommittedFiles(directory)).toEqual(["a"]);
  });

  it("fails the commit, without retrying, when staging and committed file are both gone", async () => {
    const { harness } = fileSink();
    await harness.initialize();
    await harness.write("a");
    await harness.snapshot(1);
    const [staged] = await stagingNames();
    await unlink(join(directory, ".staging", staged ?? ""));
    const failure = await harness.notifyComplete(1).catch((error: unknown) => error);
    expect(failure).toMatchObject({ code: "COMMIT_FAILED", checkpointId: 1 });
    expect((failure as Error).message).toMatch(/records of this transaction are gone/);
    expect(harness.metrics.read("onceflow_commit_retries_total")).toBe(0);
  });

  it("deletes the staging files of the subtasks it recovered after the restore, and only those", async () => {
    await mkdir(join(directory, ".staging"), { recursive: true });
    const hex = "0123456789abcdef";
    const leftovers = [
      `part-1-3-${hex}.staging`, // subtask 1, began after 2 but not restored as pending: delete
      `part-1-4-${hex}.staging`, // subtask 1, began after 3 = the restored one: delete
      `part-1-9-${hex}.staging`, // subtask 1, much later attempt: delete
      `part-0-7-${hex}.staging`, // another live subtask's: keep
      `part-4-5-${hex}.staging`, // old subtask 4, gone after scaling in to 3: 4 % 3 = 1, delete
      `part-5-5-${hex}.staging`, // old subtask 5: 5 % 3 = 2, not ours, keep
      `other-1-9-${hex}.staging`, // another sink's prefix: keep
      "unrelated.txt",
    ];
    for (const name of leftovers) await writeFile(join(directory, ".staging", name), "x");
    const { harness } = fileSink({}, 1, 3);
    await harness.initialize({ checkpointId: 3, state: {} });
    // The new open transaction has written nothing, so it has no staging file yet.
    expect(await stagingNames()).toEqual(
      [
        `other-1-9-${hex}.staging`,
        `part-0-7-${hex}.staging`,
        `part-5-5-${hex}.staging`,
        "unrelated.txt",
      ].sort(),
    );
    const cleanup = harness.logger.entries.find((entry) => entry.message.startsWith("deleted staging files"));
    expect(cleanup?.fields.deleted).toHaveLength(4);
  });

  it("keeps the staging files of newer incarnations: a zombie's start must not delete what a newer process pre-committed", async () => {
    await mkdir(join(directory, ".staging"), { recursive: true });
    const hex = "0123456789abcdef";
    const leftovers = [
      `part-0-3-i4-${hex}.staging`, // an older incarnation's: delete
      `part-0-3-i5-${hex}.staging`, // this incarnation's (an earlier try of it): delete
      `part-0-4-${hex}.staging`, // from before incarnations were in the name: delete
      `part-0-4-i6-${hex}.staging`, // the newer process's, maybe in its stored checkpoint: keep
    ];
    for (const name of leftovers) await writeFile(join(directory, ".staging", name), "x");
    const { sink } = fileSink();
    const harness = new SinkTestHarness<unknown>(sink, { incarnation: 5 });
    await harness.initialize({ checkpointId: 2, state: {} });
    expect(await stagingNames()).toEqual([`part-0-4-i6-${hex}.staging`]);
    const kept = harness.logger.entries.find((entry) =>
      entry.message.startsWith("kept staging files of newer"),
    );
    expect(kept?.fields.kept).toEqual([`part-0-4-i6-${hex}.staging`]);
  });

  it("deletes this subtask's leftover staging files on a fresh start", async () => {
    await mkdir(join(directory, ".staging"), { recursive: true });
    await writeFile(
      join(directory, ".staging", "part-0-1-0123456789abcdef.staging"),
      "crashed before any checkpoint",
    );
    const { harness } = fileSink();
    await harness.initialize();
    expect(await stagingNames()).toEqual([]);
  });

  for (const newParallelism of [1, 3]) {
    it(`commits every pending file exactly once after rescaling 2 → ${newParallelism}`, async () => {
      const checkpoints: HarnessCheckpoint[] = [];
      for (const subtaskIndex of [0, 1]) {
        const { harness } = fileSink({}, subtaskIndex, 2);
        await harness.initialize();
        await harness.write(`${subtaskIndex}-a`);
        await harness.checkpoint(1);
        await harness.write(`${subtaskIndex}-b`);
        await harness.snapshot(2);
        await harness.write(`${subtaskIndex}-c`);
        checkpoints.push(await harness.snapshot(3)); // 2 and 3 pending: no notification came
        await harness.write(`${subtaskIndex}-open`.padEnd(300_000, "."));
      }
      expect(await stagingNames()).toHaveLength(6);
      const states = redistributeOperatorState(
        checkpoints.map((checkpoint) => checkpoint.state),
        newParallelism,
      );
      for (const [subtaskIndex, state] of states.entries()) {
        const { harness } = fileSink({}, subtaskIndex, newParallelism);
        await harness.initialize({ checkpointId: 3, state });
      }
      expect(await stagingNames()).toEqual([]);
      const records = await readCommittedFiles<string>(directory);
      expect([...records].sort()).toEqual(["0-a", "0-b", "0-c", "1-a", "1-b", "1-c"]);
    });
  }
});

describe("readCommittedFiles", () => {
  it("orders files by checkpoint, then subtask, and ignores dot-files and folders", async () => {
    const hex = "0123456789abcdef";
    await mkdir(join(directory, ".staging"));
    await mkdir(join(directory, "nested"));
    await writeFile(join(directory, ".staging", `part-0-9-${hex}.staging`), '"staged"\n');
    await writeFile(join(directory, ".hidden"), '"hidden"\n');
    await writeFile(join(directory, `part-1-10-${hex}.jsonl`), '"cp10-s1"\n');
    await writeFile(join(directory, `part-0-10-${hex}.jsonl`), '"cp10-s0"\n');
    await writeFile(join(directory, `part-0-9-${hex}.jsonl`), '"cp9-s0"\n\n');
    expect(await readCommittedFiles(directory)).toEqual(["cp9-s0", "cp10-s0", "cp10-s1"]);
  });

  it("returns nothing for a missing directory", async () => {
    expect(await readCommittedFiles(join(directory, "missing"))).toEqual([]);
  });
});
