import { redisService } from "@onceflow/testkit";
import {
  describeSource,
  type SourceContract,
  type SourceContractScope,
  useService,
} from "@onceflow/testkit/vitest";
import { createClient } from "redis";
import { afterAll, beforeAll } from "vitest";
import { type RedisClient, type RedisStreamSplit, RedisStreamsSource } from "../src/index.js";

// The source contract suite (every record once after a restore from any checkpoint, positions that
// never go back or skip, rescale up and down, idle streams, close on every path, a bounded source
// that ends …) against a real Redis: ONCEFLOW_REDIS_URL when set, else redis:7 in Docker, else a
// redis-server the testkit starts on a free port for this file and stops after it.

interface Order {
  readonly id: number;
  readonly item: string;
}

const redis = useService(redisService());
// Writes the suite's input: XADD to the case's streams.
let writer: RedisClient;

beforeAll(async () => {
  writer = createClient({ url: redis().url });
  await writer.connect();
});

afterAll(async () => {
  await writer?.close();
});

const streamOf = (scope: SourceContractScope, split: number) => `contract:${scope.id}:${split}`;
const streamsOf = (scope: SourceContractScope) =>
  Array.from({ length: scope.splits }, (_, split) => streamOf(scope, split));
// The clients each case's readers made: one still open after close() is a leak.
const clientsOf = new Map<string, RedisClient[]>();

function contractOf(bounded: boolean): SourceContract<Order, RedisStreamSplit> {
  return {
    name: `RedisStreamsSource (${bounded ? "bounded" : "continuous"})`,
    writeInput: async (scope, split, records) => {
      for (const record of records)
        await writer.xAdd(streamOf(scope, split), "*", { value: JSON.stringify(record) });
    },
    createSource: (scope) =>
      new RedisStreamsSource<Order>({
        url: redis().url,
        streams: streamsOf(scope),
        bounded,
        // Small batches and a short interval: checkpoints fall between the entries of a stream.
        batchSize: 2,
        pollIntervalMs: 10,
        createClient: (url) => {
          const client = createClient({ url }) as RedisClient;
          clientsOf.set(scope.id, [...(clientsOf.get(scope.id) ?? []), client]);
          return client;
        },
      }),
    createRecord: (index) => ({ id: index, item: `item-${index}` }),
    lingering: (scope) =>
      (clientsOf.get(scope.id) ?? [])
        .filter((client) => client.isOpen)
        .map((_, index) => `open Redis connection #${index} of the case's readers`),
    teardown: async (scope) => {
      clientsOf.delete(scope.id);
      await writer.del(streamsOf(scope));
    },
  };
}

describeSource(contractOf(false));
describeSource(contractOf(true));
