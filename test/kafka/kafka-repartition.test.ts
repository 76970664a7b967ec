import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { repartitionTopicName } from "@onceflow/connector-kafka";
import { afterEach, describe, expect, it } from "vitest";
import { ChildJob, produceSlowly } from "./helpers/child-job.js";
import {
  createTopic,
  kafkaBrokers,
  produce,
  readAll,
  sleep,
  uniqueName,
  withAdmin,
} from "./helpers/kafka.js";

// One process per subtask: every keyed record crosses processes through the repartition topic.
// Child processes, a topic of 128 partitions created at the first start, and kills: minutes a test
// on a loaded two-core machine, hence the long timeout.
const fixture = fileURLToPath(new URL("./fixtures/repartition-job.ts", import.meta.url));
const children: ChildJob[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.process.exitCode === null && child.process.signalCode === null) await child.kill("SIGKILL");
  }
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function setup(name: string, partitions: number) {
  const input = await createTopic(uniqueName(`${name}-in`), partitions);
  const output = await createTopic(uniqueName(`${name}-out`), 1);
  const dir = await mkdtemp(join(tmpdir(), `onceflow-${name}-`));
  dirs.push(dir);
  const jobId = uniqueName(name);
  const env = {
    BROKERS: kafkaBrokers().join(","),
    INPUT_TOPIC: input,
    OUTPUT_TOPIC: output,
    JOB_ID: jobId,
    CHECKPOINT_DIR: dir,
  };
  return { input, output, env, jobId };
}

function startSubtask(env: Record<string, string>, subtask: number, parallelism: number): ChildJob {
  const child = ChildJob.start(
    { ...env, SUBTASK: String(subtask), PARALLELISM: String(parallelism) },
    fixture,
  );
  children.push(child);
  return child;
}

async function startAll(
  env: Record<string, string>,
  parallelism: number,
  order?: number[],
): Promise<ChildJob[]> {
  const started: ChildJob[] = [];
  for (const subtask of order ?? Array.from({ length: parallelism }, (_, index) => index)) {
    started[subtask] = startSubtask(env, subtask, parallelism);
  }
  return started;
}

/** Events `{ key, t }`: `keys` keys in turn, event time rising by 5 ms a record. */
function events(from: number, count: number, keys: number): string[] {
  return Array.from({ length: count }, (_, offset) => {
    const index = from + offset;
    return JSON.stringify({ key: `k${index % keys}`, t: index * 5 });
  });
}

/** Count per `key|windowStart` over `values`, as a tumbling window of `windowMs` gives it. */
function windowCounts(values: string[], windowMs: number): Map<string, number> {
  const counts = new Map<string, number>();
  for (const value of values) {
    const { key, t } = JSON.parse(value) as { key: string; t: number };
    const name = `${key}|${Math.floor(t / windowMs) * windowMs}`;
    counts.set(name, (counts.get(name) ?? 0) + 1);
  }
  return counts;
}

/**
 * The committed rows `key|windowStart|count`, read by an independent read_committed reader, until
 * every window of `reference` has its row; each (key, window) must appear once, with its count.
 */
async function expectWindowCounts(output: string, reference: Map<string, number>, timeoutMs = 90_000) {
  const records = await readAll(output, { expected: reference.size, timeoutMs });
  const rows = records.map((record) => record.value ?? "");
  const seen = new Map<string, number>();
  const doubled: string[] = [];
  for (const row of rows) {
    const [key, start, count] = row.split("|");
    const name = `${key}|${start}`;
    if (seen.has(name)) doubled.push(row);
    seen.set(name, Number(count));
  }
  const wrong = [...reference]
    .filter(([name, count]) => seen.get(name) !== count)
    .map(([name, count]) => `${name}: ${seen.get(name)} instead of ${count}`);
  const unexpected = [...seen.keys()].filter((name) => !reference.has(name));
  const found = {
    doubled: doubled.slice(0, 5),
    wrong: wrong.slice(0, 5),
    unexpected: unexpected.slice(0, 5),
  };
  expect(found, `${JSON.stringify(found)} (${rows.length} rows)`).toEqual({
    doubled: [],
    wrong: [],
    unexpected: [],
  });
}

/**
 * A running count per key, committed: for a key with n records, exactly `key=1` … `key=n`, each once
 * — a record lost or doubled anywhere (input, exchange, output) changes the set.
 */
async function expectRunningCounts(output: string, values: string[]) {
  const expected: string[] = [];
  const counts = new Map<string, number>();
  for (const value of values) {
    const { key } = JSON.parse(value) as { key: string };
    const count = (counts.get(key) ?? 0) + 1;
    counts.set(key, count);
    expected.push(`${key}=${count}`);
  }
  const records = await readAll(output, { expected: expected.length, timeoutMs: 120_000 });
  const got = records.map((record) => record.value ?? "");
  const missing = expected.filter((row) => !got.includes(row));
  const seen = new Set<string>();
  const doubled = got.filter((row) => seen.has(row) || !seen.add(row));
  expect({ missing: missing.slice(0, 5), doubled: doubled.slice(0, 5), total: got.length }).toEqual({
    missing: [],
    doubled: [],
    total: expected.length,
  });
}

/** Sum over partitions of the repartition topic's log start offsets: above 0 once records are purged. */
async function logStartOffsets(topic: string): Promise<number> {
  return withAdmin(async (admin) => {
    const offsets = await admin.fetchTopicOffsets(topic);
    return offsets.reduce((sum, partition) => sum + Number(partition.low), 0);
  });
}

describe("keyBy across processes through a Kafka repartition topic", { timeout: 420_000 }, () => {
  it.each([
    ["the exchange's codec", false],
    ["the keyBy's serializer", true],
  ])(
    "a key on two partitions, one process per subtask, records crossing with %s: one count of 6 for the whole job",
    async (_, serialized) => {
      const { input, output, env } = await setup("repartition-count", 2);
      for (const partition of [0, 1]) {
        await produce(
          input,
          [1, 2, 3].map((t) => ({ value: JSON.stringify({ key: "a", t }), partition })),
        );
      }
      const processes = await startAll(
        { ...env, BOUNDED: "1", SERIALIZER: serialized ? "1" : "0" },
        2,
        [1, 0],
      );
      for (const child of processes) await child.waitFor(/^DONE end-of-input/, 120_000);
      const records = await readAll(output, { expected: 6, timeoutMs: 10_000 });
      expect(records.map((record) => record.value).sort()).toEqual([
        "a=1",
        "a=2",
        "a=3",
        "a=4",
        "a=5",
        "a=6",
      ]);
      expect(processes.some((child) => child.lines.includes("DESERIALIZED"))).toBe(serialized);
      const purged = await logStartOffsets(repartitionTopicName(env.JOB_ID, "counts"));
      expect({
        purged: purged > 0,
        stderr: purged > 0 ? "" : processes.map((child) => child.stderr).join("\n"),
      }).toEqual({
        purged: true,
        stderr: "",
      });
    },
  );

  it("without an exchange configured, one process per subtask with keyBy fails at start saying what to add", async () => {
    const { env } = await setup("repartition-missing", 1);
    const child = startSubtask({ ...env, NO_EXCHANGE: "1" }, 0, 2);
    const { code } = await child.exited;
    expect(code).toBe(1);
    expect(child.stderr).toMatch(/CONFIGURATION|keyBy before 'counts'/);
    expect(child.stderr).toMatch(/exchange: kafkaRepartitionExchange\(\{ brokers \}\)/);
  });

  it("windowed counts per (key, window) equal the reference across a rescale 2 → 3 → 1, and read records are purged", async () => {
    const { input, output, env, jobId } = await setup("repartition-rescale", 3);
    const keys = 7;
    const windowMs = 100;
    const runEnv = { ...env, MODE: "window", WINDOW_MS: String(windowMs) };
    const phases = [
      { parallelism: 2, order: [0, 1], from: 0, count: 600 },
      { parallelism: 3, order: [2, 0, 1], from: 600, count: 600 },
      { parallelism: 1, order: [0], from: 1200, count: 600 },
    ];
    for (const phase of phases) {
      const processes = await startAll(runEnv, phase.parallelism, phase.order);
      for (const child of processes) await child.waitFor(/^STARTED/);
      await produceSlowly(input, events(phase.from, phase.count, keys), {
        perTick: 60,
        tickMs: 100,
        partitions: 3,
      });
      // Let the records cross, then stop every process with a final checkpoint (SIGTERM).
      await sleep(4000);
      for (const child of processes) child.process.kill("SIGTERM");
      for (const child of processes) {
        const { code } = await child.exited;
        expect({ code, stderr: code === 0 ? "" : child.stderr }).toEqual({ code: 0, stderr: "" });
      }
    }
    // The last run again, with a record far ahead in event time on every partition: every window
    // of the input closes.
    const last = await startAll(runEnv, 1);
    const closing = Array.from({ length: 3 }, (_, partition) => ({
      value: JSON.stringify({ key: "end", t: 1e9 }),
      partition,
    }));
    await produce(input, closing);
    const all = events(0, 1800, keys);
    await expectWindowCounts(output, windowCounts(all, windowMs), 90_000).catch(async (error) => {
      throw new Error(`${String(error)}\nstderr: ${last.map((child) => child.stderr).join("\n")}`);
    });
    expect(await logStartOffsets(repartitionTopicName(jobId, "counts"))).toBeGreaterThan(0);
  });

  it("an idle sender does not hold event time back on the keyed side: windows fire", async () => {
    const { input, output, env } = await setup("repartition-idle", 2);
    const runEnv = { ...env, MODE: "window", WINDOW_MS: "100", IDLENESS_MS: "500" };
    const processes = await startAll(runEnv, 2);
    for (const child of processes) await child.waitFor(/^CHECKPOINT /);
    // Partition 1 (read by one subtask) stays empty; its sender goes idle after 500 ms.
    const values = events(0, 200, 3);
    await produce(
      input,
      values.map((value) => ({ value, partition: 0 })),
    );
    await produce(input, [{ value: JSON.stringify({ key: "end", t: 1e9 }), partition: 0 }]);
    await expectWindowCounts(output, windowCounts(values, 100), 90_000).catch((error) => {
      throw new Error(`${String(error)}\nstderr: ${processes.map((child) => child.stderr).join("\n")}`);
    });
  });

  // Each restarted process is killed only after it completed a checkpoint of its own, at a delay
  // that moves through the 150 ms checkpoint cycle (snapshot, pre-commit, commit).
  it.each(["count", "window"] as const)(
    "SIGKILLed processes, restarted in any order: every %s exactly right",
    async (mode) => {
      const { input, output, env } = await setup(`repartition-kill-${mode}`, 3);
      const keys = 7;
      const windowMs = 100;
      const total = 2400;
      const runEnv = { ...env, MODE: mode, WINDOW_MS: String(windowMs), INTERVAL: "150" };
      const processes = await startAll(runEnv, 2);
      for (const child of processes) await child.waitFor(/^CHECKPOINT /);
      const producing = produceSlowly(input, events(0, total, keys), {
        perTick: 20,
        tickMs: 100,
        partitions: 3,
      });
      const victims = [[0], [1], [0, 1], [1], [1, 0], [0]];
      let kills = 0;
      for (const [round, victimsOfRound] of victims.entries()) {
        await sleep(400 + ((round * 337) % 900));
        for (const subtask of victimsOfRound) {
          await processes[subtask]!.kill("SIGKILL");
          kills++;
        }
        for (const subtask of [...victimsOfRound].reverse())
          processes[subtask] = startSubtask(runEnv, subtask, 2);
        for (const subtask of victimsOfRound) await processes[subtask]!.waitFor(/^CHECKPOINT /, 90_000);
      }
      await producing;
      const all = events(0, total, keys);
      const stderr = () => processes.map((child) => child.stderr).join("\n");
      if (mode === "count") {
        await expectRunningCounts(output, all).catch((error) => {
          throw new Error(`${String(error)}\nstderr: ${stderr()}`);
        });
      } else {
        const closing = Array.from({ length: 3 }, (_, partition) => ({
          value: JSON.stringify({ key: "end", t: 1e9 }),
          partition,
        }));
        await produce(input, closing);
        await expectWindowCounts(output, windowCounts(all, windowMs), 120_000).catch((error) => {
          throw new Error(`${String(error)}\nstderr: ${stderr()}`);
        });
      }
      expect(kills).toBe(8);
    },
  );
});
