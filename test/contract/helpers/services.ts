import { randomBytes } from "node:crypto";
import { connect as connectTcp, type Socket } from "node:net";
import { connect as connectTls } from "node:tls";
import { createKafkaTopic, readCommittedKafkaRecords } from "@onceflow/testkit";
import { Kafka, logLevel } from "kafkajs";
import pg from "pg";

// Where the shared services are, and independent readers of what was committed there. The root
// globalSetup (testkit) exports ONCEFLOW_KAFKA_BROKERS / ONCEFLOW_POSTGRES_URL for the run; read in
// this one place so it can switch to vitest's `inject` later. A missing service fails, never skips.

/** The shared broker's bootstrap addresses. */
export function kafkaBrokers(): string[] {
  const value = process.env.ONCEFLOW_KAFKA_BROKERS;
  if (value === undefined || value.trim() === "") {
    throw new Error(
      "ONCEFLOW_KAFKA_BROKERS is not set: run through the root vitest config (its global setup starts Kafka) or point it at a broker, e.g. ONCEFLOW_KAFKA_BROKERS=127.0.0.1:39092",
    );
  }
  return value.split(",").map((broker) => broker.trim());
}

/** The shared PostgreSQL (with prepared transactions). */
export function postgresUrl(): string {
  const value = process.env.ONCEFLOW_POSTGRES_URL;
  if (value === undefined || value.trim() === "") {
    throw new Error(
      "ONCEFLOW_POSTGRES_URL is not set: run through the root vitest config (its global setup starts PostgreSQL) or point it at one with max_prepared_transactions > 0",
    );
  }
  return value;
}

/** A lowercase name unique to this run (topics and tables are shared). */
export function uniqueName(prefix: string): string {
  return `${prefix}_${randomBytes(5).toString("hex")}`;
}

/** A kafkajs client whose sockets can all be destroyed at once, as a SIGKILL of its process would. */
export interface KillableKafka {
  readonly kafka: Kafka;
  /** Destroys every socket the client opened; nothing is sent (no abort, no leave-group). */
  kill(): void;
}

/** Makes a {@link KillableKafka} (its sockets are tracked through kafkajs' `socketFactory`). */
export function killableKafka(brokers: string[], clientId = "onceflow-test"): KillableKafka {
  const sockets = new Set<Socket>();
  const kafka = new Kafka({
    brokers,
    clientId,
    logLevel: logLevel.NOTHING,
    socketFactory: ({ host, port, ssl, onConnect }) => {
      const socket: Socket = ssl
        ? connectTls(Object.assign({ host, port, servername: host }, ssl), onConnect)
        : connectTcp({ host, port }, onConnect);
      socket.setKeepAlive(true, 60_000);
      sockets.add(socket);
      socket.once("close", () => sockets.delete(socket));
      return socket;
    },
  });
  return {
    kafka,
    kill: () => {
      for (const socket of sockets) socket.destroy();
      sockets.clear();
    },
  };
}

/** One record as a read_committed reader sees it. */
export interface CommittedRecord {
  readonly partition: number;
  readonly offset: string;
  readonly key: string | null;
  readonly value: string | null;
}

/**
 * Everything committed in `topic` right now, read like the Java consumer with
 * isolation.level=read_committed (the testkit's reader; kafkajs' own consumer lets aborted records
 * through when transactions of several producers interleave).
 */
export async function readCommittedTopic(
  brokers: string[],
  topic: string,
  timeoutMs = 30_000,
): Promise<CommittedRecord[]> {
  return readCommittedKafkaRecords(brokers, topic, { timeoutMs });
}

/** Creates a topic and waits for its leaders. */
export async function createTopic(brokers: string[], topic: string, partitions: number): Promise<void> {
  await createKafkaTopic(brokers, topic, { partitions });
}

/** Deletes topics, ignoring ones that are gone. */
export async function deleteTopics(brokers: string[], topics: string[]): Promise<void> {
  const admin = new Kafka({ brokers, clientId: "onceflow-admin", logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    await admin.deleteTopics({ topics, timeout: 10_000 }).catch(() => undefined);
  } finally {
    await admin.disconnect();
  }
}

/** Runs one statement on a fresh connection (never one of the sink's sessions). */
export async function sql<R extends pg.QueryResultRow = pg.QueryResultRow>(
  url: string,
  text: string,
  values: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => undefined);
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/** A pg pool whose connections can all be cut at once, as a SIGKILL of its process would. */
export interface KillablePool {
  readonly pool: pg.Pool;
  /**
   * Cuts every connection from the server side (pg_terminate_backend, as the server does when the
   * client's process is gone: what was open is rolled back, prepared transactions stay), then stops
   * the pool from opening new ones. Resolves once the connections are gone.
   */
  kill(): Promise<void>;
  /** Ends the pool (after a kill too). */
  end(): Promise<void>;
}

/** Makes a {@link KillablePool}. */
export function killablePool(url: string, max = 4): KillablePool {
  const clients = new Set<pg.PoolClient>();
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on("error", () => undefined);
  pool.on("connect", (client) => {
    // A cut connection errors on its client too; a killed process would not see it either.
    client.on("error", () => undefined);
    clients.add(client as pg.PoolClient);
  });
  return {
    pool,
    kill: async () => {
      const pids = [...clients]
        .map((client) => (client as unknown as { processID: number | null }).processID)
        .filter((pid): pid is number => typeof pid === "number");
      clients.clear();
      // Not awaited: end() also waits for checked-out connections, which a dead process never returns.
      void pool.end().catch(() => undefined);
      if (pids.length === 0) return;
      await sql(url, "SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid", [pids]);
      // Wait until the server has really let go of them (and of their locks).
      for (let attempt = 0; attempt < 100; attempt++) {
        const alive = await sql(url, "SELECT 1 FROM pg_stat_activity WHERE pid = ANY($1::int[])", [pids]);
        if (alive.length === 0) return;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      throw new Error(`backends ${pids.join(", ")} did not go away after pg_terminate_backend`);
    },
    end: () => pool.end().catch(() => undefined),
  };
}
