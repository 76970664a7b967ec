import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { copyText } from "../src/sql/copy-writer.js";
import { tableName } from "../src/sql/identifiers.js";
import { preparedPostgresUrl, sql, uniqueName } from "./helpers/postgres.js";

/**
 * `copyText` hands the statement, every data message and CopyDone to the socket at once, without
 * waiting for the server's CopyInResponse. These check it against a real server: what it reports
 * and stores, and that a COPY the server refuses part way (or at once) fails with the server's
 * error and leaves the connection usable, the data sent ahead ignored.
 */
const url = preparedPostgresUrl();
const table = uniqueName("copy_writer");
let client: pg.Client;

beforeAll(async () => {
  await sql(url, `CREATE TABLE ${table} (id bigint NOT NULL, payload text)`);
  client = new pg.Client({ connectionString: url });
  await client.connect();
});

afterAll(async () => {
  await client?.end();
  await sql(url, `DROP TABLE IF EXISTS ${table}`);
});

const target = tableName("public", table);
const lines = (from: number, count: number, payload: string) =>
  Array.from({ length: count }, (_, index) => `${from + index}\t${payload}\n`).join("");

describe("copyText", () => {
  it("copies strings and Buffers longer than one data message, and reports the rows", async () => {
    await sql(url, `TRUNCATE ${table}`);
    const long = "y".repeat(300);
    // 2,000 rows of ~305 bytes: about 600 KiB, ten 64 KiB data messages, one cut mid-row.
    const chunks = [lines(0, 1000, long), Buffer.from(lines(1000, 1000, long)), Buffer.alloc(0)];
    const copied = await copyText(client as unknown as pg.PoolClient, target, ["id", "payload"], chunks);
    expect(copied).toBe(2000);
    const [row] = await sql<{ n: string; ids: string; bad: string }>(
      url,
      `SELECT count(*) AS n, count(DISTINCT id) AS ids, count(*) FILTER (WHERE payload <> $1) AS bad FROM ${table}`,
      [long],
    );
    expect(row).toEqual({ n: "2000", ids: "2000", bad: "0" });
  });

  it("rejects with the server's error for a row it refuses, and the connection goes on", async () => {
    await sql(url, `TRUNCATE ${table}`);
    // Line 3 is not a bigint; about 1 MiB follows it, sent before the server said anything.
    const chunks = [`1\ta\n2\tb\nthree\tc\n`, lines(4, 4000, "z".repeat(250))];
    const failure = await copyText(
      client as unknown as pg.PoolClient,
      target,
      ["id", "payload"],
      chunks,
    ).then(
      () => undefined,
      (error: unknown) => error as pg.DatabaseError,
    );
    expect(failure?.code).toBe("22P02");
    expect(failure?.where).toMatch(/line 3\b/);
    expect((await client.query("SELECT 41 + 1 AS answer")).rows).toEqual([{ answer: 42 }]);
    expect((await sql<{ n: string }>(url, `SELECT count(*) AS n FROM ${table}`))[0]?.n).toBe("0");
    // And the next COPY on the same connection works.
    await expect(
      copyText(client as unknown as pg.PoolClient, target, ["id", "payload"], [lines(0, 10, "ok")]),
    ).resolves.toBe(10);
  });

  it("rejects when the statement itself fails, the data sent ahead ignored", async () => {
    const missing = tableName("public", uniqueName("no_such_table"));
    const failure = await copyText(
      client as unknown as pg.PoolClient,
      missing,
      ["id"],
      [lines(0, 2000, "x")],
    ).then(
      () => undefined,
      (error: unknown) => error as pg.DatabaseError,
    );
    expect(failure?.code).toBe("42P01");
    expect((await client.query("SELECT 'still here' AS status")).rows).toEqual([{ status: "still here" }]);
  });

  it("rejects on a client that was closed, instead of waiting for a write that never comes", async () => {
    const closed = new pg.Client({ connectionString: url });
    await closed.connect();
    await closed.end();
    await expect(
      copyText(closed as unknown as pg.PoolClient, target, ["id", "payload"], [lines(0, 10, "x")]),
    ).rejects.toThrow(/not queryable/);
  });

  it("copies nothing from no chunks", async () => {
    await expect(copyText(client as unknown as pg.PoolClient, target, ["id", "payload"], [])).resolves.toBe(
      0,
    );
  });
});
