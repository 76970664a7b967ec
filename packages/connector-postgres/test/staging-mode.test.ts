import { PostgresSink, type PostgresSinkOptions } from "@onceflow/connector-postgres";
import { TransactionError } from "@onceflow/core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { noPreparedPostgresUrl, sql, uniqueName } from "./helpers/postgres.js";
import { SinkDriver } from "./helpers/sink-driver.js";

interface Event {
  id: number;
  payload: string;
}

// The machine's server: max_prepared_transactions = 0, which is what staging mode is for.
const url = noPreparedPostgresUrl();
// A schema of its own: the staging tables counted below are this file's only, whatever runs beside it.
const schema = uniqueName("pgstage");
const table = "events";
const upsertTable = "events_u";

beforeAll(async () => {
  await sql(url, `CREATE SCHEMA ${schema}`);
  await sql(url, `CREATE TABLE ${schema}.${table} (id bigint NOT NULL, payload text)`);
  await sql(
    url,
    `CREATE TABLE ${schema}.${upsertTable} (id bigint PRIMARY KEY, payload text, version int NOT NULL)`,
  );
});

afterAll(async () => {
  await sql(url, `DROP SCHEMA IF EXISTS ${schema} CASCADE`);
});

function sinkFor(sinkId: string, extra: Partial<PostgresSinkOptions<Event>> = {}): PostgresSink<Event> {
  return new PostgresSink<Event>({
    connection: url,
    mode: "staging",
    sinkId,
    schema,
    table,
    columns: ["id", "payload"],
    toRow: (event) => ({ id: event.id, payload: event.payload }),
    batchSize: 3,
    ...extra,
  } as PostgresSinkOptions<Event>);
}

function tagged(sinkId: string, from: number, to: number): Event[] {
  return Array.from({ length: to - from }, (_, index) => ({
    id: from + index,
    payload: `${sinkId}:${from + index}`,
  }));
}

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, index) => from + index);

async function idsOf(sinkId: string): Promise<number[]> {
  const rows = await sql<{ id: string }>(
    url,
    `SELECT id FROM ${schema}.${table} WHERE payload LIKE $1 ORDER BY id`,
    [`${sinkId}:%`],
  );
  return rows.map((row) => Number(row.id));
}

async function stagingTables(): Promise<string[]> {
  const rows = await sql<{ relname: string }>(
    url,
    `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname LIKE 'onceflow_stage_%' AND c.relkind = 'r'`,
    [schema],
  );
  return rows.map((row) => `${schema}.${row.relname}`);
}

describe("PostgresSink in staging mode (driven by hand)", () => {
  it("stages rows during the interval and moves them in one transaction when the checkpoint completes", async () => {
    const sinkId = uniqueName("s");
    const driver = new SinkDriver(sinkFor(sinkId));
    await driver.start();
    expect((driver.sink as PostgresSink<Event>).activeMode).toBe("staging");
    const before = await stagingTables();
    await driver.write(...tagged(sinkId, 0, 10));
    expect(await idsOf(sinkId)).toEqual([]);
    const staged = (await stagingTables()).filter((name) => !before.includes(name));
    expect(staged).toHaveLength(1);
    // Flushed per batch (batchSize 3): 9 rows are in the staging table before the checkpoint (the
    // last batch may still be in flight).
    await vi.waitFor(async () =>
      expect(await sql(url, `SELECT count(*)::int AS n FROM ${staged[0]}`)).toEqual([{ n: 9 }]),
    );
    await driver.snapshot(1);
    expect(await idsOf(sinkId)).toEqual([]);
    await driver.complete(1);
    expect(await idsOf(sinkId)).toEqual(range(0, 10));
    expect((await stagingTables()).filter((name) => !before.includes(name))).toEqual([]);
    expect(
      await sql(
        url,
        `SELECT checkpoint_id::int, row_count::int FROM ${schema}.onceflow_sink_markers WHERE sink_id = $1`,
        [sinkId],
      ),
    ).toEqual([{ checkpoint_id: 1, row_count: 10 }]);
    await driver.close();
  });

  it.each([
    ["by default, in the background: the notification returns while the move waits", undefined, true],
    ["with backgroundCommits: false, inline: the notification waits for the move", false, false],
  ] as const)("commits %s", async (_, backgroundCommits, returnsFirst) => {
    const sinkId = uniqueName("s");
    const extra = backgroundCommits === undefined ? {} : { backgroundCommits };
    const driver = new SinkDriver(sinkFor(sinkId, extra));
    await driver.start();
    await driver.write(...tagged(sinkId, 0, 4));
    await driver.snapshot(1);
    // Another session holds the target table: the move (INSERT … SELECT) waits for its lock.
    const { Client } = (await import("pg")).default;
    const holder = new Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query("BEGIN");
      await holder.query(`LOCK TABLE ${schema}.${table} IN ACCESS EXCLUSIVE MODE`);
      let returned = false;
      const notified = (driver.sink as PostgresSink<Event>).notifyCheckpointComplete(1).then(() => {
        returned = true;
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(returned).toBe(returnsFirst);
      await holder.query("COMMIT");
      await notified;
      await (driver.sink as PostgresSink<Event>).awaitBackgroundCommit();
    } finally {
      await holder.end();
    }
    expect(await idsOf(sinkId)).toEqual(range(0, 4));
    await driver.close();
  });

  it("recovers: moves the restored checkpoint's rows and discards rows of checkpoints that never completed", async () => {
    const sinkId = uniqueName("s");
    const before = await stagingTables();
    const first = new SinkDriver(sinkFor(sinkId));
    await first.start();
    await first.write(...tagged(sinkId, 0, 5));
    const checkpoint1 = await first.snapshot(1);
    await first.write(...tagged(sinkId, 5, 9));
    await first.snapshot(2); // never completes
    await first.write(...tagged(sinkId, 9, 12)); // open
    // The crash: no close, so the open staging table stays too (its batch may still be in flight).
    await vi.waitFor(async () =>
      expect((await stagingTables()).filter((name) => !before.includes(name))).toHaveLength(3),
    );

    const second = new SinkDriver(sinkFor(sinkId, { name: "second" }));
    // The same process runs both here: let the second take over the sink id as a new process would.
    await first.close();
    await second.start(checkpoint1);
    expect(await idsOf(sinkId)).toEqual(range(0, 5));
    expect((await stagingTables()).filter((name) => !before.includes(name))).toEqual([]);
    await second.write(...tagged(sinkId, 5, 12));
    await second.snapshot(2);
    await second.complete(2);
    await second.close();
    expect(await idsOf(sinkId)).toEqual(range(0, 12));
  });

  it("a replay of a moved checkpoint finds the marker and does nothing", async () => {
    const sinkId = uniqueName("s");
    const first = new SinkDriver(sinkFor(sinkId));
    await first.start();
    await first.write(...tagged(sinkId, 0, 4));
    const checkpoint1 = await first.snapshot(1);
    await first.complete(1);
    await first.close();
    const second = new SinkDriver(sinkFor(sinkId));
    await second.start(checkpoint1);
    await second.close();
    expect(await idsOf(sinkId)).toEqual(range(0, 4));
  });

  it("fences a zombie: its move fails once a newer process of the sink started", async () => {
    const sinkId = uniqueName("s");
    const zombie = new SinkDriver(sinkFor(sinkId, { commitRetry: { maxAttempts: 1 } }));
    await zombie.start();
    await zombie.write(...tagged(sinkId, 0, 4));
    await zombie.snapshot(1);
    await sql(url, `UPDATE ${schema}.onceflow_sink_epochs SET epoch = epoch + 1 WHERE sink_id = $1`, [
      sinkId,
    ]);
    const error = await zombie.complete(1).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(TransactionError);
    expect((error as TransactionError).code).toBe("TRANSACTION_FENCED");
    await zombie.close();
    expect(await idsOf(sinkId)).toEqual([]);
  });

  it("reports dropped staged rows of a completed checkpoint as lost, naming the checkpoint", async () => {
    const sinkId = uniqueName("s");
    const sink = sinkFor(sinkId, { commitRetry: { maxAttempts: 1 } });
    const driver = new SinkDriver(sink);
    await driver.start();
    await driver.write(...tagged(sinkId, 0, 4));
    await driver.snapshot(5);
    // Only this transaction's table: other tests may be staging on this server right now.
    const staged = sink.pendingTransactions().map((pending) => pending.transaction.stageTable);
    expect(staged).toHaveLength(1);
    for (const name of staged) await sql(url, `DROP TABLE ${schema}.${name}`);
    const error = await driver.complete(5).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(TransactionError);
    expect((error as TransactionError).code).toBe("TRANSACTION_TIMED_OUT");
    expect((error as TransactionError).checkpointId).toBe(5);
    await driver.close();
  });

  it("upserts with duplicates in a batch, across batches and checkpoints: the last record wins", async () => {
    const sinkId = uniqueName("s");
    const driver = new SinkDriver(
      new PostgresSink<{ id: number; payload: string; version: number }>({
        connection: url,
        mode: "staging",
        sinkId,
        schema,
        table: upsertTable,
        columns: ["id", "payload", "version"],
        operation: { type: "upsert", conflictColumns: ["id"] },
        batchSize: 4,
      }),
    );
    await driver.start();
    const base = Math.floor(Math.random() * 1e9);
    const rows = (version: number, ids: number[]) =>
      ids.map((id) => ({ id: base + id, payload: `${sinkId}:${id}@${version}`, version }));
    await driver.write(...rows(1, [1, 2, 1, 1, 3, 2]));
    await driver.write(...rows(2, [2, 4]));
    await driver.snapshot(1);
    await driver.complete(1);
    await driver.write(...rows(3, [1, 4, 4]));
    await driver.snapshot(2);
    await driver.complete(2);
    await driver.close();
    const result = await sql<{ id: string; version: number }>(
      url,
      `SELECT id, version FROM ${schema}.${upsertTable} WHERE payload LIKE $1 ORDER BY id`,
      [`${sinkId}:%`],
    );
    expect(result.map((row) => [Number(row.id) - base, row.version])).toEqual([
      [1, 3],
      [2, 2],
      [3, 1],
      [4, 3],
    ]);
  });
});
