import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KafkaSink, KafkaSource } from "@onceflow/connector-kafka";
import { createMemoryLogger, filesystem, isOnceflowError, Job, type Logger } from "@onceflow/core";
import { describe, expect, it } from "vitest";
import { createTopic, kafkaBrokers, produce, readAll, uniqueName } from "./helpers/kafka.js";

// A Kafka → Kafka job restarted with its sink's uid renamed: the checkpoint's Kafka transactions
// belong to no operator of the new job. The restore is refused, naming them; allowed, the warning
// names the transactions that this job gives up.

describe("Kafka job restored with a renamed sink uid", { timeout: 120_000 }, () => {
  it("is refused with the sink's transactions named, and runs when dropping them is allowed", async () => {
    const input = await createTopic(uniqueName("claims-in"), 2);
    const output = await createTopic(uniqueName("claims-out"), 1);
    const inputs = Array.from({ length: 400 }, (_, index) => `r${index}`);
    await produce(
      input,
      inputs.map((value, index) => ({ value, partition: index % 2 })),
    );
    const jobId = uniqueName("claims");
    const prefix = uniqueName("claims-out");
    const dir = await mkdtemp(join(tmpdir(), "onceflow-kafka-claims-"));
    const build = (sinkUid: string, options: { allowNonRestoredState?: boolean; logger?: Logger } = {}) => {
      const job = new Job({
        jobId,
        checkpointing: { interval: 200, storage: filesystem(dir) },
        restartStrategy: { type: "fixed-delay", attempts: 3, delay: 50 },
        ...options,
      });
      job
        .fromSource(
          new KafkaSource({
            brokers: kafkaBrokers(),
            topics: [input],
            startingOffsets: "earliest",
            stoppingOffsets: "latest",
          }),
          { uid: "in" },
        )
        .map((record) => String(record.value))
        .sinkTo(
          new KafkaSink<string>({
            brokers: kafkaBrokers(),
            topic: output,
            deliveryGuarantee: "exactly-once",
            transactionalIdPrefix: prefix,
          }),
          { uid: sinkUid },
        );
      return job;
    };
    try {
      const first = await build("out").execute();
      expect(first.endedBy).toBe("end-of-input");

      const refused = await build("out-v2")
        .execute()
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      expect(isOnceflowError(refused) && refused.code).toBe("NON_RESTORED_STATE");
      const details = (refused as { details: { checkpointId: number; operators: unknown } }).details;
      expect(details.checkpointId).toBe(first.lastCheckpointId);
      expect(details.operators).toMatchObject([
        {
          uid: "out",
          kinds: ["sink transactions"],
          pendingTransactions: [
            { checkpointId: first.lastCheckpointId, transaction: expect.stringContaining(prefix) },
          ],
        },
      ]);
      expect((refused as Error).message).toContain("operator 'out' (sink transactions: 1 pending");

      const logger = createMemoryLogger();
      const allowed = await build("out-v2", { allowNonRestoredState: true, logger }).execute();
      expect(allowed.endedBy).toBe("end-of-input");
      const warnings = logger.entries.filter((entry) => entry.level === "warn").map((entry) => entry.message);
      expect(warnings).toContainEqual(
        expect.stringMatching(
          /dropping state .*operator 'out' \(sink transactions: 1 pending.*not committed by this job/,
        ),
      );
      // …and names each pending one, so that it can be looked for (or aborted) in Kafka.
      expect(warnings).toContainEqual(
        expect.stringContaining(
          `Pending transactions given up: 'out' checkpoint ${first.lastCheckpointId}: {`,
        ),
      );
      expect(warnings.join("\n")).toContain(prefix);
      // The run that stopped at the end of its input had committed everything: nothing lost, nothing twice.
      const records = await readAll(output, { expected: inputs.length, timeoutMs: 30_000 });
      expect(records.map((record) => record.value).sort()).toEqual([...inputs].sort());
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
