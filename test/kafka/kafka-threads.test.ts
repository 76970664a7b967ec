import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { createTopic, kafkaBrokers, produce, readAll, uniqueName } from "./helpers/kafka.js";

// `onceflow run --threads` with the real broker: a Kafka → Kafka exactly-once job at parallelism 2,
// each subtask in a worker thread of one process (the built CLI and connector, as a user runs them).
const root = fileURLToPath(new URL("../..", import.meta.url));
const cli = join(root, "packages/core/dist/cli.js");
const dist = (name: string) => pathToFileURL(join(root, `packages/${name}/dist/index.js`)).href;

interface Settings {
  brokers: string[];
  input: string;
  output: string;
  prefix: string;
  checkpoints: string;
}

/**
 * A Kafka → Kafka exactly-once job at parallelism 2: `pass-through` writes each value with the
 * process and thread that handled it; `keyed-count` keys by the record key (with
 * kafkaRecordSerializer) and writes `key|count|value|value's type|topic|origin header`.
 */
function jobModule(settings: Settings, pipeline: "pass-through" | "keyed-count"): string {
  const middle =
    pipeline === "pass-through"
      ? `.map((record) => \`\${record.value}|\${process.pid}|\${threadId}\`)`
      : `.keyBy((record) => record.key ?? "", { serializer: kafkaRecordSerializer() })
    .process(() => new CountPerKey(), { uid: "count" })`;
  return `import { threadId } from "node:worker_threads";
import { Deserializers, KafkaSink, KafkaSource, kafkaRecordSerializer } from ${JSON.stringify(dist("connector-kafka"))};
import { Job, filesystem } from ${JSON.stringify(dist("core"))};
const settings = ${JSON.stringify(settings)};
class CountPerKey {
  open(context) { this.count = context.getState({ name: "count" }); }
  processElement(record, context, out) {
    const count = (this.count.value() ?? 0) + 1;
    this.count.update(count);
    const as = Buffer.isBuffer(record.value) ? "buffer" : typeof record.value;
    out.collect([record.key, count, record.value.toString(), as, record.topic, record.headers.origin].join("|"));
  }
}
export function createJob(launch) {
  const job = new Job({
    jobId: settings.prefix,
    parallelism: 2,
    checkpointing: { interval: 300, storage: filesystem(settings.checkpoints) },
    restartStrategy: { type: "none" },
    ...launch,
  });
  job
    .fromSource(
      new KafkaSource({ brokers: settings.brokers, topics: [settings.input], startingOffsets: "earliest", stoppingOffsets: "latest", maxBatchSize: ${pipeline === "pass-through" ? 100 : 16}${pipeline === "pass-through" ? "" : ", value: Deserializers.buffer()"} }),
      { uid: "in" },
    )
    ${middle}
    .sinkTo(
      () => new KafkaSink({ brokers: settings.brokers, topic: settings.output, deliveryGuarantee: "exactly-once", transactionalIdPrefix: settings.prefix }),
      { uid: "out" },
    );
  return job;
}
`;
}

/** Runs `onceflow run job.mjs --threads` in `cwd`; resolves with its exit code, output and pid. */
async function runInThreads(cwd: string, module: string) {
  await writeFile(join(cwd, "job.mjs"), module);
  const child = spawn(process.execPath, [cli, "run", "job.mjs", "--threads"], {
    cwd,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let printed = "";
  child.stdout.on("data", (chunk: Buffer) => (printed += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (printed += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  return { code, printed, pid: child.pid };
}

describe("onceflow run --threads, Kafka → Kafka", { timeout: 180_000 }, () => {
  it("runs both subtasks in threads of one process; every input exactly once, read_committed", async () => {
    const input = await createTopic(uniqueName("threads-in"), 4);
    const output = await createTopic(uniqueName("threads-out"), 2);
    const inputs = Array.from({ length: 4000 }, (_, i) => `m${i}`);
    for (let p = 0; p < 4; p++) {
      await produce(
        input,
        inputs.filter((_, i) => i % 4 === p).map((value) => ({ value, partition: p })),
      );
    }
    const cwd = await mkdtemp(join(tmpdir(), "onceflow-kafka-threads-"));
    try {
      const { code, printed, pid } = await runInThreads(
        cwd,
        jobModule(
          {
            brokers: kafkaBrokers(),
            input,
            output,
            prefix: uniqueName("threads"),
            checkpoints: join(cwd, "checkpoints"),
          },
          "pass-through",
        ),
      );
      expect(code, printed).toBe(0);
      expect(printed).toMatch(/job finished in 2 thread\(s\): .*"endedBy":"end-of-input"/);

      const records = await readAll(output, { expected: inputs.length, timeoutMs: 30_000 });
      const values = records.map((record) => (record.value ?? "").split("|"));
      expect(values.map(([value]) => value).sort()).toEqual([...inputs].sort());
      // One process, two threads: each subtask wrote from its own thread.
      expect(new Set(values.map(([, processId]) => processId))).toEqual(new Set([String(pid)]));
      expect(new Set(values.map(([, , thread]) => thread)).size).toBe(2);
    } finally {
      await rm(cwd, { recursive: true, force: true });
    }
  });

  it("keyBy with kafkaRecordSerializer across threads: one count per key over every partition, records as they were read", async () => {
    const input = await createTopic(uniqueName("threads-keyed-in"), 4);
    const output = await createTopic(uniqueName("threads-keyed-out"), 2);
    // Every key in every partition: only an exchange by key gives one count per key.
    const keys = Array.from({ length: 10 }, (_, i) => `k${i}`);
    const perPartition = 30;
    for (let p = 0; p < 4; p++) {
      await produce(
        input,
        Array.from({ length: perPartition }, (_, i) => ({
          key: keys[i % keys.length]!,
          value: `p${p}-${i}`,
          partition: p,
          headers: { origin: `p${p}` },
        })),
      );
    }
    const cwd = await mkdtemp(join(tmpdir(), "onceflow-kafka-threads-keyed-"));
    try {
      const { code, printed } = await runInThreads(
        cwd,
        jobModule(
          {
            brokers: kafkaBrokers(),
            input,
            output,
            prefix: uniqueName("threads-keyed"),
            checkpoints: join(cwd, "checkpoints"),
          },
          "keyed-count",
        ),
      );
      expect(code, printed).toBe(0);

      const total = 4 * perPartition;
      const records = await readAll(output, { expected: total, timeoutMs: 30_000 });
      const rows = records.map((record) => (record.value ?? "").split("|"));
      expect(rows).toHaveLength(total);
      for (const key of keys) {
        const counts = rows.filter(([rowKey]) => rowKey === key).map(([, count]) => Number(count));
        // 4 partitions × 3 records of each key: counts 1..12, each once — one state per key.
        expect(counts.sort((a, b) => a - b)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
      }
      // Every record arrived as it was read: its value a Buffer, its topic and headers kept.
      expect(rows.map(([, , value]) => value).sort()).toEqual(
        Array.from({ length: 4 }, (_, p) => Array.from({ length: perPartition }, (_, i) => `p${p}-${i}`))
          .flat()
          .sort(),
      );
      expect(new Set(rows.map(([, , , as, topic]) => `${as} ${topic}`))).toEqual(
        new Set([`buffer ${input}`]),
      );
      for (const [, , value, , , origin] of rows) expect(origin).toBe(value!.split("-")[0]);
    } finally {
      await rm(cwd, { recursive: true, force: true });
    }
  });
});
