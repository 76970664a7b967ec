import { PostgresSink } from "@onceflow/connector-postgres";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { withClient } from "../src/sql/pool.js";
import { HandoverTerminatingProxy } from "./helpers/handover-terminating-proxy.js";
import { preparedGids, preparedPostgresUrl, sql, uniqueName } from "./helpers/postgres.js";
import { SinkDriver } from "./helpers/sink-driver.js";

// A connection that the server ends in the instant pg-pool hands it out (ReadyForQuery and the
// 57P01 FATAL in one read) emitted `error` before `await pool.connect()` resumed its caller, with
// no listener: Node ended the process. The PostgresSink exploration hit it by terminating a killed
// process's sessions while they were being opened. Here a proxy makes that moment on purpose; the
// call must fail with the 57P01 and the process must go on.

const url = preparedPostgresUrl();
const table = uniqueName("handover");
let proxy: HandoverTerminatingProxy;
const uncaught: unknown[] = [];
const recordUncaught = (error: unknown) => uncaught.push(error);

beforeAll(async () => {
  await sql(url, `CREATE TABLE ${table} (id bigint NOT NULL, sink text NOT NULL)`);
  proxy = await HandoverTerminatingProxy.start(url);
  process.on("uncaughtException", recordUncaught);
});

afterAll(async () => {
  process.off("uncaughtException", recordUncaught);
  await proxy?.close();
  await sql(url, `DROP TABLE IF EXISTS ${table}`);
});

afterEach(() => {
  expect(uncaught).toEqual([]);
  expect(proxy.errors).toEqual([]);
});

const failureOf = (work: () => Promise<unknown>): Promise<unknown> =>
  work().then(
    () => undefined,
    (caught: unknown) => caught,
  );

/** The `code` of an error and of each of its causes. */
function codesOf(error: unknown): unknown[] {
  const codes: unknown[] = [];
  for (let current = error; current instanceof Error; current = current.cause) {
    codes.push((current as { code?: unknown }).code);
  }
  return codes;
}

function sinkFor(
  sinkId: string,
  connection: { connection: string } | { pool: pg.Pool },
): PostgresSink<number> {
  return new PostgresSink<number>({
    ...connection,
    mode: "prepared",
    sinkId,
    table,
    columns: ["id", "sink"],
    toRow: (id) => [id, sinkId],
  });
}

/** A fresh attempt writes ids 0..9 through checkpoint 1; the table must then hold each once. */
async function writeEveryIdOnce(sinkId: string, sink: PostgresSink<number>): Promise<void> {
  const driver = new SinkDriver(sink);
  await driver.start();
  await driver.write(...Array.from({ length: 10 }, (_, id) => id));
  await driver.snapshot(1);
  await driver.complete(1);
  await driver.close();
  const rows = await sql<{ id: string }>(url, `SELECT id FROM ${table} WHERE sink = $1 ORDER BY id`, [
    sinkId,
  ]);
  expect(rows.map((row) => Number(row.id))).toEqual(Array.from({ length: 10 }, (_, id) => id));
  expect(await preparedGids(url, sinkId)).toEqual([]);
}

describe("a connection the server ends as the pool hands it out", () => {
  it("fails withClient's work with the 57P01 before it runs, not the process", async () => {
    const pool = new pg.Pool({ connectionString: proxy.url });
    pool.on("error", () => undefined);
    try {
      proxy.terminateNext();
      let ran = false;
      const failure = await failureOf(() =>
        withClient(pool, async () => {
          ran = true;
        }),
      );
      expect(uncaught).toEqual([]);
      expect(proxy.terminated).toBe(1);
      expect(codesOf(failure)).toContain("57P01");
      expect(ran).toBe(false);
      // The lost connection was discarded: the next one works.
      expect(await withClient(pool, async (client) => (await client.query("SELECT 1 AS one")).rows)).toEqual([
        { one: 1 },
      ]);
    } finally {
      await pool.end();
    }
  });

  it("PostgresSink: the setup's connection fails the attempt; the next attempt writes every id once", async () => {
    const sinkId = uniqueName("hs");
    const before = proxy.terminated;
    proxy.terminateNext();
    const failed = new SinkDriver(sinkFor(sinkId, { connection: proxy.url }));
    const failure = await failureOf(() => failed.start());
    await failed.close();
    expect(uncaught).toEqual([]);
    expect(proxy.terminated).toBe(before + 1);
    expect(codesOf(failure)).toContain("57P01");
    await writeEveryIdOnce(sinkId, sinkFor(sinkId, { connection: proxy.url }));
  });

  it("PostgresSink: the open transaction's connection fails the checkpoint; the next attempt writes every id once", async () => {
    const sinkId = uniqueName("ht");
    const pool = new pg.Pool({ connectionString: proxy.url });
    pool.on("error", () => undefined);
    try {
      const driver = new SinkDriver(sinkFor(sinkId, { pool }));
      await driver.start();
      // The transaction must take a new connection: discard the idle ones the setup left.
      while (pool.idleCount > 0) (await pool.connect()).release(true);
      const before = proxy.terminated;
      proxy.terminateNext();
      const failure = await failureOf(async () => {
        await driver.write(1, 2, 3);
        await driver.snapshot(1);
      });
      await driver.close();
      expect(uncaught).toEqual([]);
      expect(proxy.terminated).toBe(before + 1);
      expect(codesOf(failure)).toContain("57P01");
      await writeEveryIdOnce(sinkId, sinkFor(sinkId, { pool }));
    } finally {
      await pool.end();
    }
  });
});
