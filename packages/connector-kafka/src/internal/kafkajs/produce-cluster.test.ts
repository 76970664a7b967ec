import { describe, expect, it } from "vitest";
import {
  encodeProduceRequest,
  PRODUCE_API_KEY,
  PRODUCE_API_VERSION,
} from "../../protocol/produce-request.js";
import type { KafkajsConnection, ProduceClusterSource } from "./produce-cluster.js";
import { produceClusterOf } from "./produce-cluster.js";

// The bridge's side of kafkajs's connection, played by a stand-in that answers every request it
// is handed; the real broker's side is in test/idempotent-producer.test.ts and test/kafka.

/** A kafkajs connection stand-in: records what is written to its socket and logged; answers `reply`. */
function connection(options: { authenticated?: boolean; connected?: boolean } = {}) {
  const written: Buffer[] = [];
  const logged: string[] = [];
  const events: string[] = [];
  let authenticated = options.authenticated ?? true;
  let nextCorrelationId = 41;
  const reply = Buffer.from("answer");
  const stand: KafkajsConnection = {
    clientId: "bridge-test",
    socket: {
      write: (data) => {
        written.push(data);
        return true;
      },
    },
    requestQueue: {
      push: (request) => {
        events.push(`push ${request.entry.apiName} ${request.entry.correlationId}`);
        request.sendRequest();
        queueMicrotask(() => request.entry.resolve({ payload: reply, size: reply.length }));
      },
    },
    isAuthenticated: () => authenticated,
    authenticate: async () => {
      events.push("authenticate");
      authenticated = true;
    },
    failIfNotConnected: () => {
      if (options.connected === false)
        throw Object.assign(new Error("Not connected"), { name: "KafkaJSConnectionError" });
    },
    nextCorrelationId: () => nextCorrelationId++,
    logDebug: (message) => logged.push(message),
  };
  return { stand, written, logged, events, reply };
}

function clusterOn(stand: KafkajsConnection) {
  const source = {
    findBroker: async () => ({
      disconnect: async () => undefined,
      connectionPool: { getConnection: async () => stand },
    }),
  } as unknown as ProduceClusterSource;
  return produceClusterOf(source, { addPartitionsToTransaction: async () => undefined });
}

function encodeFor(events: string[]) {
  const clientIds: Array<string | null> = [];
  const encoded: Buffer[] = [];
  const encode = (clientId: string | null) => {
    events.push("encode");
    clientIds.push(clientId);
    const request = encodeProduceRequest({
      clientId,
      transactionalId: null,
      acks: -1,
      timeoutMs: 5,
      partitions: [],
    });
    encoded.push(request);
    return request;
  };
  return { encode, clientIds, encoded };
}

describe("produceClusterOf: produce", () => {
  it("writes the very buffer encode returned to the socket, with the connection's correlation id", async () => {
    const { stand, written, logged, reply } = connection();
    const { encode, clientIds, encoded } = encodeFor([]);
    const answer = await clusterOn(stand).produce(1, encode, 30_000);
    expect(answer).toBe(reply);
    expect(clientIds).toEqual(["bridge-test"]);
    expect(written).toHaveLength(1);
    // Not a copy: kafkajs's own framing would have copied the request twice.
    expect(written[0]).toBe(encoded[0]);
    expect(written[0]?.readInt16BE(4)).toBe(PRODUCE_API_KEY);
    expect(written[0]?.readInt16BE(6)).toBe(PRODUCE_API_VERSION);
    expect(written[0]?.readInt32BE(8)).toBe(41);
    expect(logged).toEqual([
      `Request Produce(key: ${PRODUCE_API_KEY}, version: ${PRODUCE_API_VERSION})`,
      `Response Produce(key: ${PRODUCE_API_KEY}, version: ${PRODUCE_API_VERSION})`,
    ]);
  });

  it("takes a new correlation id for every request", async () => {
    const { stand, written } = connection();
    const cluster = clusterOn(stand);
    await Promise.all([1, 2, 3].map(() => cluster.produce(1, encodeFor([]).encode, 30_000)));
    expect(written.map((request) => request.readInt32BE(8))).toEqual([41, 42, 43]);
  });

  it("authenticates a connection that is not (yet, or any more) before it encodes the request", async () => {
    const { stand, events } = connection({ authenticated: false });
    await clusterOn(stand).produce(1, encodeFor(events).encode, 30_000);
    expect(events).toEqual(["authenticate", "encode", "push Produce 41"]);
  });

  it("fails without encoding or writing on a connection that is not connected", async () => {
    const { stand, written, events } = connection({ connected: false });
    await expect(clusterOn(stand).produce(1, encodeFor(events).encode, 30_000)).rejects.toMatchObject({
      name: "KafkaJSConnectionError",
    });
    expect(events).toEqual([]);
    expect(written).toEqual([]);
  });
});
