import { PostgresSink, type PostgresSinkOptions } from "@onceflow/connector-postgres";
import { CheckpointError, TransactionError } from "@onceflow/core";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { prepareTransaction } from "../src/sql/prepared-transactions.js";
import { preparedGids, preparedPostgresUrl, sql, uniqueName } from "./helpers/postgres.js";
import { SinkDriver } from "./helpers/sink-driver.js";

interface Event {
  id: number;
  payload: string;
}

const url = preparedPostgresUrl();
const table = uniqueName("pg2pc");
const upsertTable = `${table}_u`;

beforeAll(async () => {
  await sql(url, `CREATE TABLE ${table} (id bigint NOT NULL, payload text)`);
  await sql(url, `CREATE TABLE ${upsertTable} (id bigint PRIMARY KEY, payload text, version int NOT NULL)`);
});

afterAll(async () => {
  await sql(url, `DROP TABLE IF EXISTS ${table}, ${upsertTable}`);
});

function sinkFor(sinkId: string, extra: Partial<PostgresSinkOptions<Event>> = {}): PostgresSink<Event> {
  return new PostgresSink<Event>({
    connection: url,
    mode: "prepared",
    sinkId,
    table,
    columns: ["id", "payload"],
    toRow: (event) => [event.id, event.payload],
    batchSize: 3,
    ...extra,
  } as PostgresSinkOptions<Event>);
}

const events = (from: number, to: number): Event[] =>
  Array.from({ length: to - from }, (_, index) => ({ id: from + index, payload: `p${from + index}` }));

async function idsOf(sinkId: string): Promise<number[]> {
  const rows = await sql<{ id: string }>(url, `SELECT id FROM ${table} WHERE payload LIKE $1 ORDER BY id`, [
    `${sinkId}:%`,
  ]);
  return rows.map((row) => Number(row.id));
}

function tagged(sinkId: string, from: number, to: number): Event[] {
  return events(from, to).map((event) => ({ ...event, payload: `${sinkId}:${event.payload}` }));
}

describe("PostgresSink in prepared mode (driven by hand)", () => {
  it("prepares at the checkpoint and commits when it completes", async () => {
    const sinkId = uniqueName("s");
    const driver = new SinkDriver(sinkFor(sinkId));
    await driver.start();
    expect((driver.sink as PostgresSink<Event>).activeMode).toBe("prepared");
    await driver.write(...tagged(sinkId, 0, 10));
    expect(await idsOf(sinkId)).toEqual([]);
    await driver.snapshot(1);
    expect(await preparedGids(url, sinkId)).toEqual([`${sinkId}-0-1-1`]);
    expect(await idsOf(sinkId)).toEqual([]);
    await driver.complete(1);
    expect(await idsOf(sinkId)).toEqual(events(0, 10).map((e) => e.id));
    expect(await preparedGids(url, sinkId)).toEqual([]);
    const markers = await sql(
      url,
      "SELECT checkpoint_id::int, row_count::int FROM onceflow_sink_markers WHERE sink_id = $1",
      [sinkId],
    );
    expect(markers).toEqual([{ checkpoint_id: 1, row_count: 10 }]);
    // An empty interval prepares nothing.
    await driver.snapshot(2);
    expect(await preparedGids(url, sinkId)).toEqual([]);
    await driver.complete(2);
    await driver.close();
  });

  it("recovers: commits the restored checkpoint's gid and rolls back every other one", async () => {
    const sinkId = uniqueName("s");
    const first = new SinkDriver(sinkFor(sinkId));
    await first.start();
    await first.write(...tagged(sinkId, 0, 5));
    const checkpoint1 = await first.snapshot(1);
    await first.write(...tagged(sinkId, 5, 9));
    await first.snapshot(2); // prepared, but checkpoint 2 never completes
    await first.write(...tagged(sinkId, 9, 12)); // open, never prepared
    await first.close(); // the crash: nothing was committed
    expect(await preparedGids(url, sinkId)).toEqual([`${sinkId}-0-1-1`, `${sinkId}-0-1-2`]);
    expect(await idsOf(sinkId)).toEqual([]);

    const second = new SinkDriver(sinkFor(sinkId));
    await second.start(checkpoint1);
    expect(await idsOf(sinkId)).toEqual(events(0, 5).map((e) => e.id));
    expect(await preparedGids(url, sinkId)).toEqual([]);
    // The replay of checkpoint 2 reuses its id: the old gid is gone, so this one can be prepared.
    await second.write(...tagged(sinkId, 5, 12));
    await second.snapshot(2);
    await second.complete(2);
    await second.close();
    expect(await idsOf(sinkId)).toEqual(events(0, 12).map((e) => e.id));
  });

  it("resolves a 42704 through the marker: a replayed commit is a no-op", async () => {
    const sinkId = uniqueName("s");
    const first = new SinkDriver(sinkFor(sinkId));
    await first.start();
    await first.write(...tagged(sinkId, 0, 4));
    const checkpoint1 = await first.snapshot(1);
    await first.complete(1); // committed, then the process dies before the next checkpoint
    await first.close();

    const second = new SinkDriver(sinkFor(sinkId));
    await second.start(checkpoint1); // COMMIT PREPARED answers 42704; the marker says committed
    await second.close();
    expect(await idsOf(sinkId)).toEqual([0, 1, 2, 3]);
  });

  it("reports a rolled-back gid without marker as lost data, naming the checkpoint", async () => {
    const sinkId = uniqueName("s");
    const driver = new SinkDriver(sinkFor(sinkId, { commitRetry: { maxAttempts: 1 } }));
    await driver.start();
    await driver.write(...tagged(sinkId, 0, 4));
    await driver.snapshot(7);
    await sql(url, `ROLLBACK PREPARED '${sinkId}-0-1-7'`);
    const error = await driver.complete(7).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(TransactionError);
    expect((error as TransactionError).code).toBe("TRANSACTION_TIMED_OUT");
    expect((error as TransactionError).checkpointId).toBe(7);
    expect((error as Error).message).toContain("checkpoint 7");
    expect((error as Error).message).toContain("LOST");
    await driver.close();
    expect(await idsOf(sinkId)).toEqual([]);
  });

  it("fails the checkpoint when PREPARE answers ROLLBACK after an error inside the transaction", async () => {
    const sinkId = uniqueName("s");
    const driver = new SinkDriver(
      new PostgresSink<Event>({
        connection: url,
        mode: "prepared",
        sinkId,
        write: async (client, rows) => {
          await client.query(
            `INSERT INTO ${table} (id, payload) SELECT * FROM unnest($1::bigint[], $2::text[])`,
            [rows.map((row) => row.id), rows.map((row) => row.payload)],
          );
          // A swallowed error leaves the transaction aborted: PREPARE then answers ROLLBACK.
          await client.query("SELECT 1 / 0").catch(() => undefined);
        },
      }),
    );
    await driver.start();
    await driver.write(...tagged(sinkId, 0, 3));
    const error = await driver.snapshot(1).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(CheckpointError);
    expect((error as Error).message).toContain("had already failed");
    await driver.close();
    expect(await preparedGids(url, sinkId)).toEqual([]);
    expect(await idsOf(sinkId)).toEqual([]);
  });

  it("checks PREPARE's command tag: ROLLBACK after an error fails instead of passing for prepared", async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query("BEGIN");
      await client.query("SELECT 1 / 0").catch(() => undefined);
      const gid = uniqueName("tag");
      const error = await prepareTransaction(client, gid, 3, "PostgresSink").then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(error).toBeInstanceOf(CheckpointError);
      expect((error as CheckpointError).checkpointId).toBe(3);
      expect((error as Error).message).toContain("answered ROLLBACK, not PREPARE");
      expect(await sql(url, "SELECT gid FROM pg_prepared_xacts WHERE gid = $1", [gid])).toEqual([]);
    } finally {
      await client.end();
    }
  });

  it("runs a custom write inside the prepared transaction", async () => {
    const sinkId = uniqueName("s");
    const driver = new SinkDriver(
      new PostgresSink<Event>({
        connection: url,
        mode: "prepared",
        sinkId,
        batchSize: 2,
        write: async (client, rows) => {
          await client.query(
            `INSERT INTO ${table} (id, payload) SELECT * FROM unnest($1::bigint[], $2::text[])`,
            [rows.map((row) => row.id), rows.map((row) => row.payload)],
          );
        },
      }),
    );
    await driver.start();
    await driver.write(...tagged(sinkId, 0, 5));
    await driver.snapshot(1);
    expect(await idsOf(sinkId)).toEqual([]);
    await driver.complete(1);
    await driver.close();
    expect(await idsOf(sinkId)).toEqual([0, 1, 2, 3, 4]);
  });

  it("upserts with duplicates in one batch and across batches and checkpoints: the last record wins", async () => {
    const sinkId = uniqueName("s");
    const sink = new PostgresSink<{ id: number; payload: string; version: number }>({
      connection: url,
      mode: "prepared",
      sinkId,
      table: upsertTable,
      columns: ["id", "payload", "version"],
      operation: { type: "upsert", conflictColumns: ["id"] },
      batchSize: 4,
    });
    const driver = new SinkDriver(sink);
    await driver.start();
    const base = Math.floor(Math.random() * 1e9);
    const rows = (version: number, ids: number[]) =>
      ids.map((id) => ({ id: base + id, payload: `${sinkId}:${id}@${version}`, version }));
    await driver.write(...rows(1, [1, 2, 1, 1, 3, 2])); // duplicates inside one batch of 4
    await driver.write(...rows(2, [2, 4]));
    await driver.snapshot(1);
    await driver.complete(1);
    await driver.write(...rows(3, [1, 4, 4]));
    await driver.snapshot(2);
    await driver.complete(2);
    await driver.close();
    const result = await sql<{ id: string; version: number }>(
      url,
      `SELECT id, version FROM ${upsertTable} WHERE payload LIKE $1 ORDER BY id`,
      [`${sinkId}:%`],
    );
    expect(result.map((row) => [Number(row.id) - base, row.version])).toEqual([
      [1, 3],
      [2, 2],
      [3, 1],
      [4, 3],
    ]);
    expect(await preparedGids(url, sinkId)).toEqual([]);
  });

  it("fences a zombie: a commit after a newer process started fails with TRANSACTION_FENCED", async () => {
    const sinkId = uniqueName("s");
    const zombie = new SinkDriver(sinkFor(sinkId, { commitRetry: { maxAttempts: 1 } }));
    await zombie.start();
    await zombie.write(...tagged(sinkId, 0, 3));
    // A newer process of the same sink starts (its epoch bump), while the zombie still writes.
    await sql(url, "UPDATE onceflow_sink_epochs SET epoch = epoch + 1 WHERE sink_id = $1", [sinkId]);
    const error = await zombie.snapshot(1).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(TransactionError);
    expect((error as TransactionError).code).toBe("TRANSACTION_FENCED");
    await zombie.close();
    expect(await preparedGids(url, sinkId)).toEqual([]);
    expect(await idsOf(sinkId)).toEqual([]);
  });
});
