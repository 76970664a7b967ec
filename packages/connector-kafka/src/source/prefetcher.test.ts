import { isOnceflowError, silentLogger } from "@onceflow/core";
import { describe, expect, it } from "vitest";
import type { KafkaConnection, KafkaProtocolError } from "../internal/kafkajs/internals.js";
import type { MissingPartitions } from "./missing-partitions.js";
import type { OffsetsResolver } from "./offsets-resolver.js";
import type { PartitionLag } from "./partition-lag.js";
import type { PartitionState } from "./partition-state.js";
import { Prefetcher } from "./prefetcher.js";

function partition(topic: string, index: number, fetchOffset: bigint): PartitionState {
  return {
    split: { splitId: `${topic}-${index}`, topic, partition: index } as unknown as PartitionState["split"],
    topic,
    partition: index,
    nextOffset: fetchOffset,
    fetchOffset,
    stoppingOffset: undefined,
    chunks: [],
    inFlight: false,
    context: {} as PartitionState["context"],
  };
}

function protocolError(type: string, retriable: boolean): KafkaProtocolError {
  return Object.assign(new Error(`broker says ${type}`), { type, code: 29, retriable });
}

/** Runs a prefetcher whose every Fetch fails the partition with `error`; resolves with the reader's failure. */
async function failureOf(error: KafkaProtocolError): Promise<unknown> {
  const state = partition("orders", 0, 41n);
  let failure: unknown;
  let prefetcher: Prefetcher | undefined;
  const connection = {
    leaders: async () => () => 1,
    fetch: async () => ({ fetched: [], failed: [{ topic: "orders", partition: 0, error }] }),
  } as unknown as KafkaConnection;
  prefetcher = new Prefetcher(
    {
      startingOffsets: "earliest",
      readCommitted: true,
      maxPrefetchBytes: 1 << 20,
      fetchMaxWaitMs: 10,
      maxBytesPerPartition: 1 << 16,
    },
    connection,
    {} as OffsetsResolver,
    {} as PartitionLag,
    silentLogger,
    new Map([["orders-0", state]]),
    { found: () => {} } as unknown as MissingPartitions,
    {
      isClosed: () => false,
      hasFailed: () => failure !== undefined,
      fail: (cause) => {
        failure = cause;
        prefetcher?.wake();
      },
      wake: () => {},
      drop: () => {},
    },
  );
  await prefetcher.fetchLoop();
  return failure;
}

describe("Prefetcher: a partition's Fetch error that no retry can cure", () => {
  it("fails the reader with a permanent typed error naming topic, partition and offset", async () => {
    const failure = await failureOf(protocolError("TOPIC_AUTHORIZATION_FAILED", false));
    expect(isOnceflowError(failure)).toBe(true);
    expect(failure).toMatchObject({
      code: "CONFIGURATION",
      retriable: false,
      details: { topic: "orders", partition: 0, offset: "41", brokerError: "TOPIC_AUTHORIZATION_FAILED" },
    });
    expect((failure as Error).message).toMatch(
      /orders partition 0 at offset 41 .*TOPIC_AUTHORIZATION_FAILED/,
    );
  });

  it("names corrupt data as a rejected record", async () => {
    const failure = await failureOf(protocolError("CORRUPT_MESSAGE", false));
    expect(failure).toMatchObject({ code: "RECORD_REJECTED", details: { brokerError: "CORRUPT_MESSAGE" } });
  });
});
