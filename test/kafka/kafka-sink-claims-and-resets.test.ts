import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import {
  KafkaPrefixClaimedError,
  type KafkaSink,
  listKafkaTransactions,
  KafkaSink as SinkOfThisProcess,
} from "@onceflow/connector-kafka";
import { GeneratorSource, Job, MemoryCheckpointStorage } from "@onceflow/core";
import { describe, expect, it } from "vitest";
import { SinkDriver } from "./helpers/drive-sink.js";
import { createTopic, kafkaBrokers, readAll, uniqueName, writeInTransaction } from "./helpers/kafka.js";
import { exactlyOnceSink } from "./helpers/sinks.js";

// What a KafkaSink's start may fence on its prefix: transactions of the run before a reset of the
// checkpoint storage (its incarnations count from 1 again), never those of a newer incarnation of
// this storage, and nothing at all of another job that claimed the prefix.

async function stateOf(transactionalId: string): Promise<string | undefined> {
  const found = await listKafkaTransactions({ brokers: kafkaBrokers(), prefix: transactionalId });
  return found.find((transaction) => transaction.transactionalId === transactionalId)?.state;
}

const sinkFor = (topic: string, prefix: string) =>
  exactlyOnceSink(topic, prefix, { transactionTimeout: 60_000 });

/** A KafkaSink of another process: its own copy of the connector (the in-process claims are per process). */
async function sinkOfProcess(name: string, topic: string, prefix: string): Promise<KafkaSink<string>> {
  const entry = createRequire(import.meta.url)
    .resolve("@onceflow/connector-kafka")
    .replace(/\.cjs$/, ".js");
  const copy = (await import(`${pathToFileURL(entry).href}?process=${name}`)) as {
    KafkaSink: typeof KafkaSink;
  };
  return new copy.KafkaSink<string>({
    brokers: kafkaBrokers(),
    topic,
    deliveryGuarantee: "exactly-once",
    transactionalIdPrefix: prefix,
    transactionTimeout: 60_000,
  });
}

describe("KafkaSink after a reset of the checkpoint storage", { timeout: 120_000 }, () => {
  it("fences the open transactions of the run before the reset, so read_committed readers go on", async () => {
    const topic = await createTopic(uniqueName("sink-reset"), 1);
    const prefix = uniqueName("reset");
    // The run before the reset had reached incarnation 40: its transaction on slot 0 stays open.
    const old = `${prefix}-0-40-0`;
    await writeInTransaction(old, topic, "old-run", "leave-open");
    expect(await stateOf(old)).toBe("Ongoing");
    // The new storage hands out incarnation 1 (its newest): 40 was never handed out by it.
    const driver = await SinkDriver.start(sinkFor(topic, prefix), {
      incarnation: 1,
      incarnationSeries: { series: "after-reset", newest: 1 },
    });
    try {
      expect(await stateOf(old)).not.toBe("Ongoing");
      await driver.write(["new-run"]);
      await driver.checkpoint(1);
      await driver.complete(1);
    } finally {
      await driver.close();
    }
    // The aborted transaction no longer holds the last stable offset.
    expect((await readAll(topic, { expected: 1 })).map((record) => String(record.value))).toEqual([
      "new-run",
    ]);
  });

  it("a job on a new checkpoint storage fences what its run on the storage before left open", async () => {
    const topic = await createTopic(uniqueName("job-reset"), 1);
    const prefix = uniqueName("job-reset");
    const old = `${prefix}-0-40-0`;
    await writeInTransaction(old, topic, "old-run", "leave-open");
    const job = new Job({
      jobId: uniqueName("reset-job"),
      checkpointing: { interval: 100, storage: new MemoryCheckpointStorage() },
      restartStrategy: { type: "none" },
    });
    job
      .fromSource(new GeneratorSource({ count: 3, generate: (index) => `new-${index}` }), { uid: "in" })
      .sinkTo(
        () =>
          new SinkOfThisProcess<string>({
            brokers: kafkaBrokers(),
            topic,
            deliveryGuarantee: "exactly-once",
            transactionalIdPrefix: prefix,
            transactionTimeout: 60_000,
          }),
        { uid: "out" },
      );
    await job.execute();
    expect(await stateOf(old)).not.toBe("Ongoing");
    expect((await readAll(topic, { expected: 3 })).map((record) => String(record.value)).sort()).toEqual([
      "new-0",
      "new-1",
      "new-2",
    ]);
  });

  it("leaves the transactions of a newer incarnation of the same storage alone (this process is a zombie)", async () => {
    const topic = await createTopic(uniqueName("sink-zombie"), 1);
    const prefix = uniqueName("zombie");
    const newer = `${prefix}-0-40-0`;
    await writeInTransaction(newer, topic, "newer", "leave-open");
    // The storage handed out 40: the process that holds it replaced this one (incarnation 1).
    const driver = await SinkDriver.start(sinkFor(topic, prefix), {
      incarnation: 1,
      incarnationSeries: { series: "same", newest: 40 },
    });
    try {
      expect(await stateOf(newer)).toBe("Ongoing");
    } finally {
      await driver.close();
      await SinkDriver.start(sinkFor(topic, prefix), { incarnation: 41 }).then((next) => next.close());
    }
    expect(await stateOf(newer)).not.toBe("Ongoing");
  });
});

describe("KafkaSink prefix claimed by a job", { timeout: 120_000 }, () => {
  it("refuses the sink of a second job with the same transactionalIdPrefix, naming both jobs, and fences nothing of the first", async () => {
    const topic = await createTopic(uniqueName("sink-claimed"), 1);
    const prefix = uniqueName("claimed");
    const first = await SinkDriver.start(sinkFor(topic, prefix), { jobId: "orders-enrich" });
    await first.write(["first-1"]);
    await first.checkpoint(1);
    await first.complete(1);
    // The first job's next transaction is open (its checkpoint 2 is being taken) when the second starts.
    await first.write(["first-2"]);
    const pending = await first.checkpoint(2);
    const open = first.pending()[0]?.transactionalId as string;
    expect(pending.size).toBeGreaterThan(0);
    const refused = await SinkDriver.start(await sinkOfProcess(`${prefix}-b`, topic, prefix), {
      jobId: "orders-archive",
    }).then(
      () => undefined,
      (error: unknown) => error,
    );
    // Thrown by the other copy of the connector: its class, by name.
    expect((refused as Error).name).toBe(KafkaPrefixClaimedError.name);
    expect(refused).toMatchObject({
      code: "CONFIGURATION",
      setting: "transactionalIdPrefix",
      prefix,
      jobId: "orders-archive",
      claimedBy: ["orders-enrich"],
    });
    expect((refused as Error).message).toContain('job "orders-enrich"');
    expect((refused as Error).message).toContain('job "orders-archive"');
    // The first job's pre-committed transaction was not fenced: it commits.
    expect(await stateOf(open)).toBe("Ongoing");
    await first.complete(2);
    await first.close();
    expect((await readAll(topic, { expected: 2 })).map((record) => String(record.value)).sort()).toEqual([
      "first-1",
      "first-2",
    ]);
    // The first job's own restart is not refused by its own claim.
    await SinkDriver.start(sinkFor(topic, prefix), { jobId: "orders-enrich" }).then((again) => again.close());
  });
});
