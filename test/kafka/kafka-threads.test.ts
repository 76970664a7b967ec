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

function jobModule(settings: {
  brokers: string[];
  input: string;
  output: string;
  prefix: string;
  checkpoints: string;
}): string {
  return `import { threadId } from "node:worker_threads";
import { KafkaSink, KafkaSource } from ${JSON.stringify(dist("connector-kafka"))};
import { Job, filesystem } from ${JSON.stringify(dist("core"))};
const settings = ${JSON.stringify(settings)};
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
      new KafkaSource({ brokers: settings.brokers, topics: [settings.input], startingOffsets: "earliest", stoppingOffsets: "latest", maxBatchSize: 100 }),
      { uid: "in" },
    )
    .map((record) => \`\${record.value}|\${process.pid}|\${threadId}\`)
    .sinkTo(
      () => new KafkaSink({ brokers: settings.brokers, topic: settings.output, deliveryGuarantee: "exactly-once", transactionalIdPrefix: settings.prefix }),
      { uid: "out" },
    );
  return job;
}
`;
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
      const module = jobModule({
        brokers: kafkaBrokers(),
        input,
        output,
        prefix: uniqueName("threads"),
        checkpoints: join(cwd, "checkpoints"),
      });
      await writeFile(join(cwd, "job.mjs"), module);
      const child = spawn(process.execPath, [cli, "run", "job.mjs", "--threads"], {
        cwd,
        stdio: ["ignore", "pipe", "pipe"],
      });
      let printed = "";
      child.stdout.on("data", (chunk: Buffer) => (printed += chunk.toString()));
      child.stderr.on("data", (chunk: Buffer) => (printed += chunk.toString()));
      const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
      expect(code, printed).toBe(0);
      expect(printed).toMatch(/job finished in 2 thread\(s\): .*"endedBy":"end-of-input"/);

      const records = await readAll(output, { expected: inputs.length, timeoutMs: 30_000 });
      const values = records.map((record) => (record.value ?? "").split("|"));
      expect(values.map(([value]) => value).sort()).toEqual([...inputs].sort());
      // One process, two threads: each subtask wrote from its own thread.
      expect(new Set(values.map(([, pid]) => pid))).toEqual(new Set([String(child.pid)]));
      expect(new Set(values.map(([, , thread]) => thread)).size).toBe(2);
    } finally {
      await rm(cwd, { recursive: true, force: true });
    }
  });
});
