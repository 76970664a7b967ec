import { PostgresRecordRejectedError, PostgresSink } from "@onceflow/connector-postgres";
import { describe, expect, it } from "vitest";
import {
  noPreparedPostgresUrl,
  preparedGids,
  preparedPostgresUrl,
  sql,
  uniqueName,
} from "./helpers/postgres.js";
import { SinkDriver } from "./helpers/sink-driver.js";

/**
 * The COPY text the sink encodes straight into reused Buffers, checked against what PostgreSQL
 * stores (read back on a fresh connection): every escaped character, NULL against the empty
 * string, multi-byte UTF-8, values longer than a buffer and than one COPY message, numbers at the
 * edges; several batches per transaction so that buffers are reused.
 */

interface Row {
  id: number;
  t: string | null;
  big: bigint | number | null;
  f: boolean | null;
  d: number | null;
}

const urls = { prepared: preparedPostgresUrl(), staging: noPreparedPostgresUrl() } as const;

const specials = [
  "",
  "\\",
  "\\N",
  "\t",
  "\n",
  "\r",
  "\r\n",
  "a\\b\tc\nd\re",
  "😀👍🏽🇩🇪 emoji",
  "漢字かなカナ한국어",
  "mixed 😀\t漢\\n\n",
  "trailing backslash\\",
];

function rowsOf(count: number): Row[] {
  const rows: Row[] = [];
  for (let id = 0; id < count; id++) {
    const t =
      id % 17 === 0
        ? null
        : id < specials.length
          ? specials[id]!
          : `row ${id} ${specials[id % specials.length]}`;
    rows.push({
      id,
      t,
      big: id % 3 === 0 ? BigInt(id) * -1_000_000_000_007n : id % 3 === 1 ? -id * 1_000_003 : null,
      f: id % 4 === 0 ? null : id % 2 === 0,
      d: id % 5 === 0 ? null : id / 8,
    });
  }
  // Longer than the buffer's first size and than one COPY message (1 MiB), multi-byte.
  rows.push({ id: count, t: `${"😀".repeat(200_000)}\t${"漢".repeat(150_000)}\\`, big: 0, f: true, d: -0.5 });
  rows.push({ id: count + 1, t: "x".repeat(3_000_000), big: Number.MAX_SAFE_INTEGER, f: false, d: 1e-7 });
  return rows;
}

function expected(row: Row) {
  return {
    id: String(row.id),
    t: row.t,
    big: row.big === null ? null : String(row.big),
    f: row.f,
    d: row.d,
  };
}

describe.each(["prepared", "staging"] as const)(
  "COPY encoding read back from PostgreSQL (%s mode)",
  (mode) => {
    const url = urls[mode];

    it.each(["insert", "upsert"] as const)("stores every value as given (%s)", async (operation) => {
      const table = uniqueName("enc");
      await sql(
        url,
        `CREATE TABLE ${table} (id bigint PRIMARY KEY, t text, big bigint, f boolean, d double precision)`,
      );
      const sinkId = uniqueName("e");
      try {
        const driver = new SinkDriver(
          new PostgresSink<Row>({
            connection: url,
            mode,
            sinkId,
            table,
            columns: ["id", "t", "big", "f", "d"],
            batchSize: 97,
            ...(operation === "upsert"
              ? { operation: { type: "upsert" as const, conflictColumns: ["id"] } }
              : {}),
          }),
        );
        await driver.start();
        const rows = rowsOf(1_000);
        // Two checkpoints, several batches each; the upsert's second write of a key wins.
        await driver.write(...rows.slice(0, 600));
        await driver.snapshot(1);
        await driver.complete(1);
        const changed =
          operation === "upsert" ? rows.slice(0, 50).map((row) => ({ ...row, t: `v2 ${row.t}` })) : [];
        await driver.write(...rows.slice(600), ...changed);
        await driver.snapshot(2);
        await driver.complete(2);
        await driver.close();
        const stored = await sql(url, `SELECT id, t, big, f, d FROM ${table} ORDER BY id`);
        const want = rows.map((row, index) => expected(index < changed.length ? changed[index]! : row));
        expect(stored.length).toBe(want.length);
        for (const [index, row] of stored.entries()) {
          if (row.t !== want[index]!.t || JSON.stringify(row) !== JSON.stringify(want[index])) {
            expect(row).toEqual(want[index]);
          }
        }
      } finally {
        if (mode === "prepared")
          for (const gid of await preparedGids(url, sinkId)) await sql(url, `ROLLBACK PREPARED '${gid}'`);
        await sql(url, `DROP TABLE IF EXISTS ${table}`);
      }
    });

    it("names a refused row from the COPY text it sent, typed by the column types", async () => {
      const table = uniqueName("encrej");
      await sql(url, `CREATE TABLE ${table} (id bigint, t text NOT NULL, f boolean, d double precision)`);
      const sinkId = uniqueName("r");
      try {
        const driver = new SinkDriver(
          new PostgresSink<{ id: number; t: string | null }>({
            connection: url,
            mode,
            sinkId,
            table,
            columns: ["id", "t", "f", "d"],
            toRow: (row) => [row.id, row.t, row.id % 2 === 0, row.id / 2],
            batchSize: 10,
          }),
        );
        await driver.start();
        const error = await (async () => {
          await driver.write(
            ...Array.from({ length: 25 }, (_, id) => ({ id, t: id === 13 ? null : `a\tb 😀 ${id}` })),
          );
          await driver.snapshot(1);
        })().then(
          () => undefined,
          (caught: unknown) => caught,
        );
        await driver.close();
        expect(error).toBeInstanceOf(PostgresRecordRejectedError);
        expect((error as PostgresRecordRejectedError).details).toMatchObject({
          sqlState: "23502",
          batchRow: 4,
          row: { id: 13, t: null, f: false, d: 6.5 },
        });
      } finally {
        if (mode === "prepared")
          for (const gid of await preparedGids(url, sinkId)) await sql(url, `ROLLBACK PREPARED '${gid}'`);
        await sql(url, `DROP TABLE IF EXISTS ${table}`);
      }
    });
  },
);
