import { KafkaSink, Serializers } from "@onceflow/connector-kafka";
import { ConfigurationError, TransactionError } from "@onceflow/core";
import { describe, expect, it } from "vitest";
import { SinkDriver, type SinkState } from "./helpers/drive-sink.js";
import { createTopic, kafkaBrokers, readAll, sleep, uniqueName } from "./helpers/kafka.js";
import { exactlyOnceSink } from "./helpers/sinks.js";

/**
 * Leaves a sink as a SIGKILL would: its open transaction is not aborted, its sockets just close, and
 * its claim on the prefix (a process-wide registry) ends as the process would. A frozen zombie keeps
 * its sockets: `{ keepConnection: true }`.
 */
async function abandon(
  driver: SinkDriver<unknown>,
  options: { keepConnection?: boolean } = {},
): Promise<void> {
  const internals = driver.sink as unknown as {
    connection?: { disconnect(): Promise<void> };
    releasePrefix(): void;
  };
  internals.releasePrefix();
  if (options.keepConnection !== true) await internals.connection?.disconnect();
}

/** What a union list state restores into every subtask: the elements of all old subtasks. */
function unionOf(states: SinkState[]): SinkState {
  const union: SinkState = new Map();
  for (const state of states) {
    for (const [name, elements] of state) union.set(name, [...(union.get(name) ?? []), ...elements]);
  }
  return union;
}

const range = (from: number, to: number, prefix = "r") =>
  Array.from({ length: to - from }, (_, i) => `${prefix}${from + i}`);
const sortedValues = (records: Array<{ value: string | null }>) =>
  records.map((r) => r.value).sort((a, b) => String(a).localeCompare(String(b), "en", { numeric: true }));

describe("KafkaSink exactly-once", { timeout: 120_000 }, () => {
  it("makes a checkpoint's records visible to read_committed consumers only when it completes", async () => {
    const topic = await createTopic(uniqueName("sink-eos"), 2);
    const driver = await SinkDriver.start(exactlyOnceSink(topic, uniqueName("eos")));
    try {
      await driver.write(range(0, 10));
      await driver.checkpoint(1);
      expect(await readAll(topic, { timeoutMs: 3000 })).toEqual([]);
      expect((await readAll(topic, { expected: 10, readUncommitted: true })).length).toBe(10);
      await driver.complete(1);
      expect(sortedValues(await readAll(topic, { expected: 10 }))).toEqual(range(0, 10));
    } finally {
      await driver.close();
    }
  });

  it("uses a bounded pool of transactional ids (prefix-subtask-incarnation-slot), one transaction per checkpoint", async () => {
    const topic = await createTopic(uniqueName("sink-pool"), 1);
    const prefix = uniqueName("pool");
    const driver = await SinkDriver.start(exactlyOnceSink(topic, prefix, { transactionalIdPoolSize: 3 }), {
      subtaskIndex: 2,
      parallelism: 3,
      incarnation: 40,
    });
    const ids = new Set<string>();
    try {
      // The next checkpoint's records arrive before the previous checkpoint completes, as in a
      // running job: one id pending, one open, one committed but still needed by a restore.
      await driver.write(["c1"]);
      for (let checkpoint = 1; checkpoint <= 8; checkpoint++) {
        await driver.checkpoint(checkpoint);
        for (const txn of driver.pending()) ids.add(txn.transactionalId ?? "");
        if (checkpoint < 8) await driver.write([`c${checkpoint + 1}`]);
        await driver.complete(checkpoint);
      }
      expect([...ids].sort()).toEqual([`${prefix}-2-40-0`, `${prefix}-2-40-1`, `${prefix}-2-40-2`]);
      expect(sortedValues(await readAll(topic, { expected: 8 }))).toEqual(range(1, 9, "c"));
    } finally {
      await driver.close();
    }
  });

  it("handles empty transactions: no broker transaction, nothing to commit or recover", async () => {
    const topic = await createTopic(uniqueName("sink-empty"), 1);
    const prefix = uniqueName("empty");
    const driver = await SinkDriver.start(exactlyOnceSink(topic, prefix));
    await driver.checkpoint(1);
    expect(driver.pending()[0]?.transactionalId).toBeUndefined();
    await driver.complete(1);
    await driver.write(["after-empty"]);
    const state = await driver.checkpoint(2);
    await driver.close();
    // Restoring a checkpoint whose transaction was empty, and one with a real transaction.
    const restored = await SinkDriver.start(exactlyOnceSink(topic, prefix), {
      restored: { checkpointId: 2, state },
    });
    await restored.checkpoint(3);
    await restored.complete(3);
    await restored.close();
    expect(sortedValues(await readAll(topic, { expected: 1 }))).toEqual(["after-empty"]);
  });

  it("a new process commits what a killed one pre-committed, from the stored id, producer id and epoch", async () => {
    const topic = await createTopic(uniqueName("sink-recover"), 2);
    const prefix = uniqueName("recover");
    const first = await SinkDriver.start(exactlyOnceSink(topic, prefix));
    await first.write(range(0, 20));
    const state = await first.checkpoint(1);
    await first.write(range(100, 105)); // open transaction, never checkpointed
    await abandon(first);

    const second = await SinkDriver.start(exactlyOnceSink(topic, prefix), {
      restored: { checkpointId: 1, state },
    });
    try {
      expect(sortedValues(await readAll(topic, { expected: 20 }))).toEqual(range(0, 20));
    } finally {
      await second.close();
    }
    // A second restore of the same checkpoint (a crash during recovery) commits again harmlessly.
    const third = await SinkDriver.start(exactlyOnceSink(topic, prefix), {
      restored: { checkpointId: 1, state },
    });
    await third.write(["after"]);
    await third.checkpoint(2);
    await third.complete(2);
    await third.close();
    expect(sortedValues(await readAll(topic, { expected: 21 }))).toEqual(
      sortedValues([...range(0, 20), "after"].map((value) => ({ value }))),
    );
  });

  it("fences leftovers at start so read_committed consumers are not stuck behind them", async () => {
    const topic = await createTopic(uniqueName("sink-linger"), 1);
    const prefix = uniqueName("linger");
    const first = await SinkDriver.start(exactlyOnceSink(topic, prefix));
    await first.write(["committed-1"]);
    const state = await first.checkpoint(1);
    await first.complete(1);
    await first.write(["lingering"]); // left open by the "crash"
    await abandon(first);

    const second = await SinkDriver.start(exactlyOnceSink(topic, prefix), {
      restored: { checkpointId: 1, state },
    });
    await second.write(["committed-2"]);
    await second.checkpoint(2);
    await second.complete(2);
    await second.close();
    // Without the abort the last stable offset would stay at "lingering" for the 15-minute timeout.
    expect(sortedValues(await readAll(topic, { expected: 2 }))).toEqual(["committed-1", "committed-2"]);
  });

  it("after a rescale from 2 subtasks to 1: commits both subtasks' pending transactions and fences subtask 1's ids", async () => {
    const topic = await createTopic(uniqueName("sink-rescale"), 1);
    const prefix = uniqueName("rescale");
    const first = await SinkDriver.start(exactlyOnceSink(topic, prefix), { subtaskIndex: 0, parallelism: 2 });
    const second = await SinkDriver.start(exactlyOnceSink(topic, prefix), {
      subtaskIndex: 1,
      parallelism: 2,
    });
    await first.write(["s0-a"]);
    await second.write(["s1-a"]);
    const state0 = await first.checkpoint(1);
    const state1 = await second.checkpoint(1);
    await second.write(["s1-lingering"]); // open on prefix-1-x when the job stops
    await abandon(first);
    await abandon(second);
    const rescaled = await SinkDriver.start(exactlyOnceSink(topic, prefix), {
      subtaskIndex: 0,
      parallelism: 1,
      restored: { checkpointId: 1, state: unionOf([state0, state1]) },
    });
    await rescaled.write(["after"]);
    await rescaled.checkpoint(2);
    await rescaled.complete(2);
    await rescaled.close();
    expect(sortedValues(await readAll(topic, { expected: 3 }))).toEqual(["after", "s0-a", "s1-a"]);
  });

  it("after a rescale from 3 subtasks to 2 recovering at once: old subtask 2 has one owner, which commits its pending transaction and fences its ids", async () => {
    const topic = await createTopic(uniqueName("sink-rescale-3-2"), 1);
    const prefix = uniqueName("rescale32");
    const old = await Promise.all(
      [0, 1, 2].map((subtaskIndex) =>
        SinkDriver.start(exactlyOnceSink(topic, prefix), { subtaskIndex, parallelism: 3 }),
      ),
    );
    const states: SinkState[] = [];
    for (const [subtaskIndex, driver] of old.entries()) {
      await driver.write([`s${subtaskIndex}-a`]);
      states.push(await driver.checkpoint(1));
      await driver.write([`s${subtaskIndex}-lingering`]); // open when the job stops
    }
    for (const driver of old) await abandon(driver);
    // Both new subtasks recover concurrently, as in a job; each sees every old element.
    const rescaled = await Promise.all(
      [0, 1].map((subtaskIndex) =>
        SinkDriver.start(exactlyOnceSink(topic, prefix), {
          subtaskIndex,
          parallelism: 2,
          restored: { checkpointId: 1, state: unionOf(states) },
        }),
      ),
    );
    for (const [subtaskIndex, driver] of rescaled.entries()) {
      await driver.write([`after-${subtaskIndex}`]);
      await driver.checkpoint(2);
      await driver.complete(2);
      await driver.close();
    }
    // A lingering transaction left unfenced would hold the last stable offset and stall this read.
    expect(sortedValues(await readAll(topic, { expected: 5, timeoutMs: 30_000 }))).toEqual([
      "after-0",
      "after-1",
      "s0-a",
      "s1-a",
      "s2-a",
    ]);
  });

  it("refuses a second running sink with the same prefix and subtask in one process (they would fence each other)", async () => {
    const topic = await createTopic(uniqueName("sink-shared-prefix"), 1);
    const prefix = uniqueName("shared");
    // Two sinks of one attempt (one incarnation) of the job.
    const incarnation = 1000;
    const first = await SinkDriver.start(exactlyOnceSink(topic, prefix, { name: "first" }), { incarnation });
    const failure = await SinkDriver.start(exactlyOnceSink(topic, prefix, { name: "second" }), {
      incarnation,
    }).catch((error: unknown) => error);
    const cause = failure instanceof Error && "cause" in failure ? (failure.cause ?? failure) : failure;
    expect(cause).toBeInstanceOf(ConfigurationError);
    expect((cause as ConfigurationError).message).toContain(
      `"${prefix}" is already used by another running KafkaSink (first)`,
    );
    // Another subtask index, or the same one once the first sink closed, is fine.
    const otherSubtask = await SinkDriver.start(exactlyOnceSink(topic, prefix), {
      subtaskIndex: 1,
      parallelism: 2,
      incarnation,
    });
    await otherSubtask.close();
    await first.write(["still-works"]);
    await first.checkpoint(1);
    await first.complete(1);
    await first.close();
    const successor = await SinkDriver.start(exactlyOnceSink(topic, prefix, { name: "successor" }), {
      incarnation,
    });
    await successor.close();
    expect(sortedValues(await readAll(topic, { expected: 1 }))).toEqual(["still-works"]);
  });

  it("fences a zombie: the old writer can neither write nor commit after a new one recovered", async () => {
    const topic = await createTopic(uniqueName("sink-zombie"), 1);
    const prefix = uniqueName("zombie");
    const zombie = await SinkDriver.start(exactlyOnceSink(topic, prefix));
    await zombie.write(["before"]);
    const state = await zombie.checkpoint(1);
    await zombie.write(["zombie-open"]);
    await abandon(zombie, { keepConnection: true }); // frozen in another process, as far as this one knows

    const successor = await SinkDriver.start(exactlyOnceSink(topic, prefix), {
      restored: { checkpointId: 1, state },
    });
    const writeError = await zombie
      .write(["zombie-more"])
      .then(() => zombie.checkpoint(2))
      .then(() => zombie.complete(2))
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(writeError).toBeInstanceOf(TransactionError);
    expect((writeError as TransactionError).code).toBe("TRANSACTION_FENCED");
    await zombie.close();
    await successor.write(["successor"]);
    await successor.checkpoint(2);
    await successor.complete(2);
    await successor.close();
    expect(sortedValues(await readAll(topic, { expected: 2 }))).toEqual(["before", "successor"]);
  });

  it("reports data lost to a transaction timeout as TRANSACTION_TIMED_OUT naming the checkpoint, never silently", async () => {
    const topic = await createTopic(uniqueName("sink-timeout"), 1);
    const prefix = uniqueName("timeout");
    const driver = await SinkDriver.start(
      exactlyOnceSink(topic, prefix, { transactionTimeout: 2000, commitRetry: { maxAttempts: 2 } }),
    );
    await driver.write(["will-be-lost"]);
    const state = await driver.checkpoint(7);
    // The broker aborts transactions older than the timeout (its cleanup runs every second here).
    await sleep(6000);
    const error = await driver.complete(7).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(TransactionError);
    expect((error as TransactionError).code).toBe("TRANSACTION_TIMED_OUT");
    expect((error as TransactionError).checkpointId).toBe(7);
    expect((error as Error).message).toMatch(/checkpoint 7 is lost/);
    await driver.close();

    // The same after a restart: recovery refuses to go on silently.
    const recovery = SinkDriver.start(
      exactlyOnceSink(topic, prefix, { transactionTimeout: 2000, commitRetry: { maxAttempts: 2 } }),
      {
        restored: { checkpointId: 7, state },
      },
    );
    await expect(recovery).rejects.toMatchObject({ code: "TRANSACTION_TIMED_OUT", checkpointId: 7 });
    expect(await readAll(topic, { timeoutMs: 2000 })).toEqual([]);
  });

  it("checks transactionTimeout against the broker's transaction.max.timeout.ms and the checkpoint interval", async () => {
    const topic = await createTopic(uniqueName("sink-config"), 1);
    const tooLong = SinkDriver.start(
      exactlyOnceSink(topic, uniqueName("cfg"), { transactionTimeout: 3_600_000 }),
    );
    await expect(tooLong).rejects.toBeInstanceOf(ConfigurationError);
    await expect(tooLong).rejects.toThrow(
      /transaction.max.timeout.ms .*\(900000 ms\): lower transactionTimeout/,
    );
    const belowInterval = SinkDriver.start(
      exactlyOnceSink(topic, uniqueName("cfg"), { transactionTimeout: 5000, checkpointInterval: 10_000 }),
    );
    await expect(belowInterval).rejects.toThrow(/not above the checkpoint interval/);
    expect(
      () => new KafkaSink({ brokers: kafkaBrokers(), topic, deliveryGuarantee: "exactly-once" }),
    ).toThrow(/transactionalIdPrefix/);
  });
});

describe("KafkaSink other guarantees and serialization", () => {
  for (const deliveryGuarantee of ["at-least-once", "none"] as const) {
    it(`${deliveryGuarantee}: writes every record once (an idempotent producer, no duplicates without a crash)`, async () => {
      const topic = await createTopic(uniqueName(`sink-${deliveryGuarantee}`), 2);
      const driver = await SinkDriver.start(
        new KafkaSink<string>({ brokers: kafkaBrokers(), topic, deliveryGuarantee }),
      );
      for (let chunk = 0; chunk < 10; chunk++) await driver.write(range(chunk * 50, chunk * 50 + 50));
      await driver.checkpoint(1, { isFinal: true });
      await driver.complete(1);
      await driver.close();
      expect(sortedValues(await readAll(topic, { expected: 500 }))).toEqual(range(0, 500));
    });
  }

  it("at-least-once: a checkpoint's pre-commit returns once every record written before it is acknowledged", async () => {
    const topic = await createTopic(uniqueName("sink-alo-flush"), 2);
    // A batch lingers for a minute: only the checkpoint's flush sends it within the test.
    const driver = await SinkDriver.start(
      new KafkaSink<string>({
        brokers: kafkaBrokers(),
        topic,
        deliveryGuarantee: "at-least-once",
        lingerMs: 60_000,
      }),
    );
    try {
      await driver.write(range(0, 50));
      expect(await readAll(topic, { readUncommitted: true })).toHaveLength(0);
      await driver.checkpoint(1);
      // No wait: acknowledged (acks=all) means in the log.
      expect(sortedValues(await readAll(topic))).toEqual(range(0, 50));
      await driver.write(range(50, 80));
      await driver.checkpoint(2);
      expect(sortedValues(await readAll(topic))).toEqual(range(0, 80));
    } finally {
      await driver.close();
    }
  });

  it("none: a checkpoint does not wait for acknowledgements, the last one (end of input, stop) does", async () => {
    const topic = await createTopic(uniqueName("sink-none-flush"), 2);
    const driver = await SinkDriver.start(
      new KafkaSink<string>({ brokers: kafkaBrokers(), topic, deliveryGuarantee: "none", lingerMs: 60_000 }),
    );
    try {
      await driver.write(range(0, 50));
      await driver.checkpoint(1);
      expect(await readAll(topic, { readUncommitted: true })).toHaveLength(0);
      await driver.checkpoint(2, { isFinal: true });
      expect(sortedValues(await readAll(topic))).toEqual(range(0, 50));
    } finally {
      await driver.close();
    }
  });

  it("serializes key, value and headers, chooses the topic per record, and uses a custom partitioner", async () => {
    const even = await createTopic(uniqueName("sink-even"), 3);
    const odd = await createTopic(uniqueName("sink-odd"), 3);
    interface Reading {
      id: number;
      sensor: string;
    }
    const driver = await SinkDriver.start(
      new KafkaSink<Reading>({
        brokers: kafkaBrokers(),
        topic: (r) => (r.id % 2 === 0 ? even : odd),
        key: { serialize: (r) => r.sensor },
        value: Serializers.json(),
        headers: (r) => ({ source: `sensor-${r.sensor}` }),
        partitioner: ({ partitionCount }) => partitionCount - 1,
        deliveryGuarantee: "exactly-once",
        transactionalIdPrefix: uniqueName("serde"),
      }),
    );
    await driver.write([
      { id: 1, sensor: "a" },
      { id: 2, sensor: "b" },
      { id: 4, sensor: "c" },
    ]);
    await driver.checkpoint(1);
    await driver.complete(1);
    await driver.close();
    const evens = await readAll(even, { expected: 2 });
    expect(
      evens.map((r) => [r.partition, r.key, JSON.parse(r.value ?? "null").id, r.headers.source]),
    ).toEqual([
      [2, "b", 2, "sensor-b"],
      [2, "c", 4, "sensor-c"],
    ]);
    expect((await readAll(odd, { expected: 1 })).map((r) => r.key)).toEqual(["a"]);
  });
});
