import { KafkaSink, type KafkaSinkOptions, listKafkaTransactions } from "@onceflow/connector-kafka";
import { ConfigurationError, OnceflowError, TransactionError } from "@onceflow/core";
import { Kafka, logLevel } from "kafkajs";
import { describe, expect, it } from "vitest";
import { SinkDriver, type SinkState } from "./helpers/drive-sink.js";
import {
  createTopic,
  kafkaBrokers,
  readAll,
  sleep,
  uniqueName,
  writeInTransaction,
} from "./helpers/kafka.js";
import { exactlyOnceSink } from "./helpers/sinks.js";

// How KafkaSink ends and starts attempts: transactional-id slots come back after a transaction lost
// to its timeout, the process-wide claim on a prefix ends however an attempt ends, and a reused
// instance forgets what an earlier attempt recovered.

// A timeout long enough for a loaded machine; the cases about timeouts set their own.
const eosSink = (topic: string, prefix: string, extra: Partial<KafkaSinkOptions<string>> = {}) =>
  exactlyOnceSink(topic, prefix, { transactionTimeout: 60_000, ...extra });

const values = (records: Array<{ value: string | null }>) =>
  records.map((record) => String(record.value)).sort();

async function stateOf(prefix: string): Promise<Map<string, string>> {
  const found = await listKafkaTransactions({ brokers: kafkaBrokers(), prefix });
  return new Map(found.map((transaction) => [transaction.transactionalId, transaction.state]));
}

/** Waits until the broker ended the transaction open on `transactionalId` (on a loaded machine its timeout cleanup may be late). */
async function waitUntilAborted(transactionalId: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  await sleep(2000);
  while (Date.now() < deadline) {
    const state = (await stateOf(transactionalId)).get(transactionalId);
    if (state === "CompleteAbort" || state === "Empty") return;
    await sleep(250);
  }
  throw new Error(`the broker did not abort ${transactionalId} after its timeout within 60 s`);
}

describe("KafkaSink transactions lost to their timeout", { timeout: 120_000 }, () => {
  it("with ignoreFailuresAfterTransactionTimeout, a dropped transaction gives its transactional id back (more drops than the pool has ids)", async () => {
    const topic = await createTopic(uniqueName("sink-dropped"), 1);
    const sink = eosSink(topic, uniqueName("dropped"), {
      transactionTimeout: 2000,
      transactionalIdPoolSize: 3,
      ignoreFailuresAfterTransactionTimeout: true,
      commitRetry: { maxAttempts: 2 },
    });
    const driver = await SinkDriver.start(sink);
    try {
      // Four drops with a pool of three ids: before the fix the fourth write found every id held
      // ("all 3 transactional ids … hold transactions", a permanent CONFIGURATION error).
      for (let checkpoint = 1; checkpoint <= 4; checkpoint++) {
        await driver.write([`lost-${checkpoint}`]);
        await driver.checkpoint(checkpoint);
        // The broker aborts it after its timeout (its cleanup runs every second here).
        await waitUntilAborted(driver.pending()[0]?.transactionalId as string);
        await driver.complete(checkpoint); // dropped: logged as DATA LOST, the job goes on
        expect(sink.pendingCheckpointIds()).toEqual([]);
      }
      await driver.write(["kept"]);
      await driver.checkpoint(5);
      await driver.complete(5);
    } finally {
      await driver.close();
    }
    const lost = driver.logger.entries.filter((entry) => /^DATA LOST/.test(entry.message));
    expect(lost.map((entry) => entry.fields.checkpointId)).toEqual([1, 2, 3, 4]);
    expect(values(await readAll(topic, { expected: 1 }))).toEqual(["kept"]);
  });
});

describe("KafkaSink claims on its prefix end with the attempt", { timeout: 120_000 }, () => {
  it("an attempt whose recovery failed does not keep the next attempt from starting (no 'already used by another running KafkaSink')", async () => {
    const topic = await createTopic(uniqueName("sink-claim"), 1);
    const prefix = uniqueName("claim");
    // A checkpoint whose pending transaction the broker cannot commit (an unknown producer id):
    // recovery fails before finishRecoveringTransactions, and the runtime never closes that sink.
    const first = await SinkDriver.start(eosSink(topic, prefix));
    await first.write(["committed-later"]);
    const state = await first.checkpoint(1);
    await first.close();
    const broken = corruptProducerIds(state);
    const failedRecovery = await SinkDriver.start(eosSink(topic, prefix), {
      restored: { checkpointId: 1, state: broken },
    }).catch((error: unknown) => error);
    expect(failedRecovery).toBeInstanceOf(OnceflowError);

    // Recovery that fails in finishRecoveringTransactions (here: no broker answers, as when the
    // broker is killed while the attempt recovers: RecoveryError).
    const unreachable = new Kafka({
      brokers: ["127.0.0.1:1"],
      clientId: "claim-test",
      logLevel: logLevel.NOTHING,
      connectionTimeout: 300,
      retry: { retries: 0 },
    });
    const failedFinish = await SinkDriver.start(
      new KafkaSink<string>({
        kafka: unreachable,
        topic,
        deliveryGuarantee: "exactly-once",
        transactionalIdPrefix: prefix,
      }),
    ).catch((error: unknown) => error);
    expect(failedFinish).toBeInstanceOf(OnceflowError);
    expect((failedFinish as OnceflowError).code).toBe("RECOVERY_FAILED");

    // The next attempt (a new instance, a newer incarnation) restores the good checkpoint.
    const next = await SinkDriver.start(eosSink(topic, prefix), { restored: { checkpointId: 1, state } });
    // An attempt that ended without close() at all: the following one takes the prefix over.
    const after = await SinkDriver.start(eosSink(topic, prefix), { restored: { checkpointId: 1, state } });
    await after.write(["after"]);
    await after.checkpoint(2);
    await after.complete(2);
    await after.close();
    await next.close(); // late close of the superseded attempt: leaves the newer claim alone
    expect(values(await readAll(topic, { expected: 2 }))).toEqual(["after", "committed-later"]);
  });

  it("two sinks of one attempt sharing a prefix are still refused", async () => {
    const topic = await createTopic(uniqueName("sink-claim-same"), 1);
    const prefix = uniqueName("claim-same");
    const first = await SinkDriver.start(eosSink(topic, prefix), { incarnation: 5_000 });
    const second = await SinkDriver.start(eosSink(topic, prefix), { incarnation: 5_000 }).catch(
      (error: unknown) => error,
    );
    const cause = second instanceof Error && "cause" in second ? (second.cause ?? second) : second;
    expect(cause).toBeInstanceOf(ConfigurationError);
    await first.close();
  });
});

describe("KafkaSink recovery by incarnation", { timeout: 180_000 }, () => {
  it("a reused sink instance forgets what an earlier attempt recovered: that id's later leftover is aborted", async () => {
    const topic = await createTopic(uniqueName("sink-reused"), 1);
    const prefix = uniqueName("reused");
    const writer = await SinkDriver.start(eosSink(topic, prefix));
    await writer.write(["c1"]);
    const state1 = await writer.checkpoint(1);
    const recoveredId = writer.pending()[0]?.transactionalId as string;
    await writer.close();

    const sink = eosSink(topic, prefix); // one instance, as when a job is given a sink instance
    const attempt1 = await SinkDriver.start(sink, { restored: { checkpointId: 1, state: state1 } });
    await attempt1.write(["s1"]);
    const state2 = await attempt1.checkpoint(2);
    await attempt1.complete(2);
    await attempt1.close();

    // The old incarnation of `writer` comes back and leaves a transaction open on its id.
    await writeInTransaction(recoveredId, topic, "zombie-leftover", "leave-open");

    // The next attempt on the same instance restores checkpoint 2, which does not hold that id.
    const attempt2 = await SinkDriver.start(sink, { restored: { checkpointId: 2, state: state2 } });
    await attempt2.write(["s2"]);
    await attempt2.checkpoint(3);
    await attempt2.complete(3);
    await attempt2.close();
    expect((await stateOf(prefix)).get(recoveredId)).not.toBe("Ongoing");
    // Left open, the leftover would hold the last stable offset, and s2 would stay invisible.
    expect(values(await readAll(topic, { expected: 3, timeoutMs: 15_000 }))).toEqual(["c1", "s1", "s2"]);
  });

  it("a fresh start aborts what older incarnations left on any slot (a larger pool) and of subtasks beyond the parallelism, never a newer incarnation's", async () => {
    const topic = await createTopic(uniqueName("sink-fresh"), 1);
    const otherTopic = await createTopic(uniqueName("sink-fresh-newer"), 1);
    const prefix = uniqueName("fresh");
    const incarnation = 6_000;
    const largerPool = `${prefix}-0-${incarnation - 10}-6`; // slot 6 of a pool of 8
    const largerParallelism = `${prefix}-2-${incarnation - 5}-0`; // subtask 2 of 3; now 0 of 2 owns it
    const withoutIncarnation = `${prefix}-0-4`; // an id from before incarnations (prefix-subtask-slot)
    const otherSubtask = `${prefix}-1-${incarnation - 5}-0`; // subtask 1's: not this one's to touch
    const newer = `${prefix}-0-${incarnation + 10}-0`; // the process that replaced this one
    await writeInTransaction(largerPool, topic, "pool-leftover", "leave-open");
    await writeInTransaction(largerParallelism, topic, "parallelism-leftover", "leave-open");
    await writeInTransaction(withoutIncarnation, topic, "legacy-leftover", "leave-open");
    await writeInTransaction(otherSubtask, otherTopic, "other-subtask", "leave-open");
    await writeInTransaction(newer, otherTopic, "newer", "leave-open");

    const driver = await SinkDriver.start(eosSink(topic, prefix, { transactionalIdPoolSize: 3 }), {
      subtaskIndex: 0,
      parallelism: 2,
      incarnation,
    });
    await driver.write(["fresh"]);
    await driver.checkpoint(1);
    await driver.complete(1);
    await driver.close();
    const states = await stateOf(prefix);
    expect(states.get(largerPool)).not.toBe("Ongoing");
    expect(states.get(largerParallelism)).not.toBe("Ongoing");
    expect(states.get(withoutIncarnation)).not.toBe("Ongoing");
    expect(states.get(otherSubtask)).toBe("Ongoing");
    expect(states.get(newer)).toBe("Ongoing");
    expect(values(await readAll(topic, { expected: 1 }))).toEqual(["fresh"]);
    const cleanup = await SinkDriver.start(eosSink(otherTopic, prefix), {
      subtaskIndex: 1,
      parallelism: 2,
      incarnation: incarnation + 20,
    });
    await cleanup.close();
  });

  it("a zombie that resumes after a newer incarnation restored its checkpoint cannot touch the newer one's transactions", async () => {
    const topic = await createTopic(uniqueName("sink-zombie-inc"), 1);
    const prefix = uniqueName("zombie-inc");
    const a = await SinkDriver.start(eosSink(topic, prefix)); // incarnation n
    await a.write(["a1", "a2"]);
    const checkpoint1 = await a.checkpoint(1);
    await a.write(["a-open"]); // open when A freezes

    // B, a newer incarnation, restores A's checkpoint 1: commits it, aborts A's open transaction,
    // and goes on with a pending transaction (checkpoint 2) and an open one.
    const b = await SinkDriver.start(eosSink(topic, prefix), {
      restored: { checkpointId: 1, state: checkpoint1 },
    });
    await b.write(["b1"]);
    await b.checkpoint(2);
    await b.write(["b2"]);

    // A resumes: its late notification re-commits checkpoint 1 (harmless); its open transaction was
    // fenced, so its write is refused — at the latest when its next checkpoint flushes it, which
    // therefore fails: nothing of A's is pre-committed. Then it aborts.
    await a.complete(1);
    await expect(a.write(["a-zombie"]).then(() => a.checkpoint(2))).rejects.toMatchObject({
      code: "TRANSACTION_FENCED",
    });
    await expect(a.write(["a-zombie-2"])).rejects.toMatchObject({ code: "TRANSACTION_FENCED" });
    await a.close();

    // B's pending and open transactions are intact.
    await b.complete(2);
    await b.checkpoint(3);
    await b.complete(3);
    await b.close();
    expect(values(await readAll(topic, { expected: 4 }))).toEqual(["a1", "a2", "b1", "b2"]);
  });

  it("restoring a checkpoint whose id was reused since fails with TRANSACTION_FENCED that says to restore the latest checkpoint", async () => {
    const topic = await createTopic(uniqueName("sink-old-restore"), 1);
    const prefix = uniqueName("old-restore");
    const driver = await SinkDriver.start(eosSink(topic, prefix, { transactionalIdPoolSize: 3 }));
    let first: SinkState | undefined;
    for (let checkpoint = 1; checkpoint <= 5; checkpoint++) {
      await driver.write([`c${checkpoint}`]);
      const state = await driver.checkpoint(checkpoint);
      first ??= state;
      await driver.complete(checkpoint);
    }
    await driver.close();
    const error = await SinkDriver.start(eosSink(topic, prefix, { transactionalIdPoolSize: 3 }), {
      restored: { checkpointId: 1, state: first as SinkState },
    }).catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(TransactionError);
    expect((error as TransactionError).code).toBe("TRANSACTION_FENCED");
    expect((error as Error).message).toMatch(/checkpoint 1 is not the job's latest/);
    expect((error as Error).message).toContain('restore: "latest"');
  });
});

/** The checkpoint's pending transactions with a producer id the broker never handed out. */
function corruptProducerIds(state: SinkState): SinkState {
  const copy: SinkState = structuredClone(state);
  for (const [name, elements] of copy) {
    copy.set(
      name,
      elements.map((element) => {
        const entry = element as { transaction: Uint8Array };
        const handle = JSON.parse(Buffer.from(entry.transaction).toString("utf8")) as Record<string, unknown>;
        handle.producerId = "987654321";
        return { ...entry, transaction: Buffer.from(JSON.stringify(handle), "utf8") };
      }),
    );
  }
  return copy;
}
