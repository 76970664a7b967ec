import { PostgresCheckpointStorage, PostgresSink } from "@onceflow/connector-postgres";
import {
  CheckpointError,
  createCompletedCheckpoint,
  GeneratorSource,
  Job,
  MemoryCheckpointStorage,
} from "@onceflow/core";
import { type PostgresService, startPostgres } from "@onceflow/testkit";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SinkDriver } from "../../packages/connector-postgres/test/helpers/sink-driver.js";

/**
 * PostgreSQL crashes (`pg_ctl stop -m immediate`) while a connector connection is
 * checked out of its pool. pg-pool listens for errors only on idle connections, so a checked-out
 * one without a listener emitted `error` (ECONNRESET, 57P01) unhandled and Node ended the process
 * — vitest reports that as an unhandled error and fails the file. Each case holds one connection
 * busy (waiting for a lock that a test session holds) at the moment of the crash. Uses a private
 * server from the testkit, never the shared one.
 */

let server: PostgresService;

async function query<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: server.connectionString });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/** A session that holds a lock until the crash ends it. */
async function holdLock(statement: string, values: unknown[] = []): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: server.connectionString });
  client.on("error", () => undefined); // the crash ends this session: expected
  await client.connect();
  await client.query("BEGIN");
  await client.query(statement, values);
  return client;
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const failureOf = (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );

beforeAll(async () => {
  server = await startPostgres({ faultInjection: true, maxPreparedTransactions: 16 });
}, 180_000);

afterAll(async () => {
  await server?.stop();
});

interface Row {
  id: number;
}

function stagingSink(table: string, extra: { lockTimeout?: number; batchSize?: number } = {}) {
  return new PostgresSink<Row>({
    connection: server.connectionString,
    mode: "staging",
    sinkId: table,
    table,
    columns: ["id"],
    toRow: (row) => [row.id],
    batchSize: extra.batchSize ?? 50,
    lockTimeout: extra.lockTimeout ?? 30_000,
    commitRetry: { maxAttempts: 40, initialDelay: 100, maxDelay: 500 },
  });
}

const rows = (from: number, to: number): Row[] =>
  Array.from({ length: to - from }, (_, index) => ({ id: from + index }));

describe("a PostgreSQL crash while a connection is checked out does not end the process", () => {
  it("during the staging move: the commit retries after the restart and moves every row once", async () => {
    const table = "crash_move";
    await query(`CREATE TABLE ${table} (id bigint NOT NULL)`);
    const driver = new SinkDriver(stagingSink(table));
    await driver.start();
    await driver.write(...rows(0, 120));
    await driver.snapshot(1);
    await holdLock(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
    const completing = driver.complete(1); // the move waits for the lock
    await pause(500);
    await server.restart({ immediate: true });
    await completing;
    await driver.close();
    expect(await query(`SELECT count(*)::int AS n, count(DISTINCT id)::int AS d FROM ${table}`)).toEqual([
      { n: 120, d: 120 },
    ]);
  });

  it("during a staging write: the checkpoint fails with the connection's error", async () => {
    const table = "crash_stage_write";
    await query(`CREATE TABLE ${table} (id bigint NOT NULL)`);
    const sink = stagingSink(table);
    const driver = new SinkDriver(sink);
    await driver.start();
    await driver.write(...rows(0, 100)); // creates the staging table (second batch in flight)
    await driver.write(...rows(100, 101));
    const stage = sink.currentTransaction()?.stageTable;
    expect(stage).toBeDefined();
    await holdLock(`LOCK TABLE ${stage} IN ACCESS EXCLUSIVE MODE`);
    const writing = failureOf(driver.write(...rows(101, 150))); // the next batch's COPY waits for the lock
    await pause(500);
    await server.restart({ immediate: true });
    const failure = (await writing) ?? (await failureOf(driver.snapshot(1)));
    expect(failure).toBeInstanceOf(Error);
    await driver.close();
  });

  it("during the epoch bump at start: the start fails, the next one succeeds", async () => {
    const table = "crash_bump";
    await query(`CREATE TABLE ${table} (id bigint NOT NULL)`);
    const first = new SinkDriver(stagingSink(table));
    await first.start(); // creates the control tables and the epoch row
    await first.close();
    await holdLock("SELECT * FROM onceflow_sink_epochs WHERE sink_id = $1 FOR UPDATE", [table]);
    const second = new SinkDriver(stagingSink(table));
    const starting = failureOf(second.start());
    await pause(500);
    await server.restart({ immediate: true });
    expect(await starting).toBeInstanceOf(Error);
    await second.close();
    const third = new SinkDriver(stagingSink(table));
    await third.start();
    await third.close();
  });

  it("during a checkpoint store: the store fails with a CheckpointError", async () => {
    const storage = new PostgresCheckpointStorage({
      connection: server.connectionString,
      table: "crash_ckpt",
    });
    await storage.list("job"); // creates the tables
    await holdLock("LOCK TABLE crash_ckpt_state IN ACCESS EXCLUSIVE MODE");
    const storing = failureOf(
      storage.store(
        createCompletedCheckpoint({
          jobId: "job",
          checkpointId: 1,
          scope: "all",
          parallelism: 1,
          subtaskStates: new Map([[0, Buffer.from("state")]]),
          triggeredAt: Date.now(),
          isFinal: false,
          summary: {},
        }),
      ),
    );
    await pause(500);
    await server.restart({ immediate: true });
    expect(await storing).toBeInstanceOf(CheckpointError);
    await storage.close();
  });

  it("a staging-mode job across two PostgreSQL crashes: the restart strategy recovers, every row exactly once", async () => {
    const table = "crash_job";
    await query(`CREATE TABLE ${table} (id bigint NOT NULL)`);
    const job = new Job({
      jobId: "crash-job",
      checkpointing: { interval: 100, storage: new MemoryCheckpointStorage() },
      restartStrategy: { type: "fixed-delay", attempts: 30, delay: 200 },
    });
    job
      .fromSource(
        new GeneratorSource<Row>({
          count: 6_000,
          splits: 1,
          generate: (id) => ({ id }),
          recordsPerSecond: 1_500,
        }),
        { uid: "src" },
      )
      .sinkTo(() => stagingSink(table, { batchSize: 20, lockTimeout: 5_000 }), { uid: "out" });
    const running = job.execute();
    await pause(1_200);
    await server.restart({ immediate: true });
    await pause(1_200);
    await server.restart({ immediate: true });
    const result = await running;
    expect(result.endedBy).toBe("end-of-input");
    expect(await query(`SELECT count(*)::int AS n, count(DISTINCT id)::int AS d FROM ${table}`)).toEqual([
      { n: 6_000, d: 6_000 },
    ]);
  });
});
