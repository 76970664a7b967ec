import { redisService } from "@onceflow/testkit";
import { describeTwoPhaseCommitSink, useService } from "@onceflow/testkit/vitest";
import { createClient } from "redis";
import { afterAll, beforeAll } from "vitest";
import { listStagedTransactions, type RedisClient, RedisSink } from "../src/index.js";

// The sink contract suite (27 cases: injected throws, simulated kills between any two steps,
// repeated or aborted notifications, restores of the same or an older checkpoint, two subtasks …)
// against a real Redis: ONCEFLOW_REDIS_URL when set, else redis:7 in Docker, else a redis-server
// the testkit starts on a free port for this file and stops after it.

interface Order {
  readonly id: number;
  readonly item: string;
}

const KEY_PREFIX = "contract";
const redis = useService(redisService());
// An independent reader: it sees only what is committed to the destination list.
let reader: RedisClient;

beforeAll(async () => {
  reader = createClient({ url: redis().url });
  await reader.connect();
});

afterAll(async () => {
  await reader?.close();
});

const destination = (scopeId: string) => `${KEY_PREFIX}-out:${scopeId}`;
// The clients each sink instance made, so that a simulated kill can cut them as a SIGKILL would.
const clientsOf = new WeakMap<object, RedisClient[]>();

describeTwoPhaseCommitSink<Order>({
  name: "RedisSink",
  createSink: (scope) => {
    const clients: RedisClient[] = [];
    const sink = new RedisSink<Order>({
      url: redis().url,
      key: destination(scope.id),
      sinkId: scope.id,
      keyPrefix: KEY_PREFIX,
      commitRetry: { initialDelay: 20, maxDelay: 500 },
      createClient: (url) => {
        const client = createClient({ url });
        clients.push(client);
        return client;
      },
    });
    clientsOf.set(sink, clients);
    return sink;
  },
  // A SIGKILL drops the connection and runs nothing else: no abort, no close.
  kill: (sink) => {
    for (const client of clientsOf.get(sink) ?? []) if (client.isOpen) client.destroy();
  },
  readCommitted: async (scope) =>
    (await reader.lRange(destination(scope.id), 0, -1)).map((element) => JSON.parse(element) as Order),
  createRecord: (index) => ({ id: index, item: `item-${index}` }),
  // Leak check, after each case: a staged list still there was left behind (pre-committed, then
  // neither committed nor aborted nor cleaned up by a recovery).
  lingering: (scope) => listStagedTransactions(reader, { keyPrefix: KEY_PREFIX, sinkId: scope.id }),
  // The handle is an id, a subtask index and a count: far below the default 64 KiB.
  maxTransactionHandleBytes: 256,
  teardown: async (scope) => {
    // The destination and the commit markers only: staged lists are what the leak check looks for.
    const markers: string[] = [];
    for await (const batch of reader.scanIterator({ MATCH: `${KEY_PREFIX}:${scope.id}:committed:*` })) {
      markers.push(...batch);
    }
    await reader.del([destination(scope.id), ...markers]);
  },
});
