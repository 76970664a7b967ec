import { TransactionError } from "@onceflow/core";
import { describe, expect, it } from "vitest";
import { fencedRecoveryError, fencedWriteError } from "./fenced-transaction-errors.js";
import type { KafkaTransaction } from "./kafka-transaction.js";

// kafkajs's errors carry Kafka's error name as `type`, also when wrapped (`originalError`, `cause`).
const fenced = Object.assign(new Error("There is a newer producer with the same transactionalId"), {
  type: "PRODUCER_FENCED",
});
const context = {
  sinkName: "orders-out",
  timeoutMs: 60_000,
  described: "orders-0-3-1 (producerId 7, epoch 2)",
};

function transaction(ageMs: number): KafkaTransaction {
  return {
    guarantee: "exactly-once",
    checkpointId: 12,
    records: 3,
    transactionalId: "orders-0-3-1",
    producerId: "7",
    producerEpoch: 2,
    startedAt: Date.now() - ageMs,
    poolSize: 5,
  };
}

describe("fencedWriteError", () => {
  it("says another process took the id over when the transaction is younger than its timeout", () => {
    const error = fencedWriteError({ originalError: fenced }, transaction(1_000), context, 13);
    expect(error).toBeInstanceOf(TransactionError);
    expect(error).toMatchObject({
      code: "TRANSACTION_FENCED",
      checkpointId: 13,
      transactionId: "orders-0-3-1",
    });
    expect((error as Error).message).toMatch(
      /^orders-out: writing to transaction orders-0-3-1 \(producerId 7/,
    );
    expect((error as Error).message).toMatch(/took over its transactional id/);
  });

  it("says the broker aborted it when it is older than transactionTimeout: nothing lost", () => {
    const error = fencedWriteError(fenced, transaction(61_000), context, 13);
    expect((error as Error).message).toMatch(
      /aborted it after transactionTimeout \(60000 ms; it is 6\d{4} ms old\)/,
    );
  });

  it("leaves any other error as it is", () => {
    const other = Object.assign(new Error("leader moved"), { type: "NOT_LEADER_FOR_PARTITION" });
    expect(fencedWriteError(other, transaction(0), context, 1)).toBe(other);
  });
});

describe("fencedRecoveryError", () => {
  const recovery = { prefix: "orders", incarnation: 5, restoredCheckpointId: 12 };

  it("names the checkpoint, the id's incarnation and says to restore the latest", () => {
    const error = fencedRecoveryError(fenced, transaction(1_000), context, recovery);
    expect(error).toMatchObject({
      code: "TRANSACTION_FENCED",
      checkpointId: 12,
      transactionId: "orders-0-3-1",
    });
    const message = (error as Error).message;
    expect(message).toMatch(/of the restored checkpoint 12 \(PRODUCER_FENCED\)/);
    expect(message).toMatch(/Only incarnation 3 uses the id \(this is incarnation 5\)/);
    expect(message).toMatch(/restore: "latest"/);
    expect(message).toMatch(/transactionalIdPrefix "orders"/);
  });

  it("leaves a transaction lost to its timeout, and any other error, as they are", () => {
    expect(fencedRecoveryError(fenced, transaction(61_000), context, recovery)).toBe(fenced);
    const other = new Error("coordinator loading");
    expect(fencedRecoveryError(other, transaction(0), context, recovery)).toBe(other);
  });
});
