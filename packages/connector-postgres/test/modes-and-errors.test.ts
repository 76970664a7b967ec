import {
  PostgresConfigurationError,
  PostgresErrorReason,
  PostgresSink,
  type PostgresSinkOptions,
} from "@onceflow/connector-postgres";
import { ConfigurationError } from "@onceflow/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { noPreparedPostgresUrl, preparedPostgresUrl, sql, uniqueName } from "./helpers/postgres.js";
import { SinkDriver } from "./helpers/sink-driver.js";

const preparedUrl = preparedPostgresUrl();
const plainUrl = noPreparedPostgresUrl();
const table = uniqueName("pgmode");
const role = uniqueName("ofnopriv");

beforeAll(async () => {
  for (const url of [preparedUrl, plainUrl]) {
    await sql(
      url,
      `CREATE TABLE ${table} (id bigint NOT NULL, payload text, must text NOT NULL, total int DEFAULT 0)`,
    );
  }
  await sql(plainUrl, `CREATE ROLE ${role} LOGIN`);
});

afterAll(async () => {
  for (const url of [preparedUrl, plainUrl]) await sql(url, `DROP TABLE IF EXISTS ${table}`);
  await sql(plainUrl, `DROP OWNED BY ${role}`).catch(() => undefined);
  await sql(plainUrl, `DROP ROLE IF EXISTS ${role}`);
});

type Row = { id: number; payload: string; must: string };

function options(url: string, extra: Partial<PostgresSinkOptions<Row>> = {}): PostgresSinkOptions<Row> {
  return {
    connection: url,
    sinkId: uniqueName("m"),
    table,
    columns: ["id", "payload", "must"],
    ...extra,
  } as PostgresSinkOptions<Row>;
}

async function startError(
  sink: PostgresSink<Row>,
  driverOptions: ConstructorParameters<typeof SinkDriver>[1] = {},
): Promise<unknown> {
  const driver = new SinkDriver(sink, driverOptions);
  const error = await driver.start().then(
    () => undefined,
    (caught: unknown) => caught,
  );
  await driver.close();
  return error;
}

describe("PostgresSink mode selection", () => {
  it("'auto' picks staging on the server with max_prepared_transactions = 0, and logs it once", async () => {
    const driver = new SinkDriver(new PostgresSink<Row>(options(plainUrl)));
    await driver.start();
    expect((driver.sink as PostgresSink<Row>).activeMode).toBe("staging");
    const lines = driver.logger.entries.filter((entry) => entry.message.includes("mode 'auto' chose"));
    expect(lines).toHaveLength(1);
    expect(lines[0]?.message).toContain("'staging'");
    expect(lines[0]?.message).toContain("max_prepared_transactions = 0");
    await driver.close();
  });

  it("'auto' picks prepared on the server with prepared transactions", async () => {
    const driver = new SinkDriver(new PostgresSink<Row>(options(preparedUrl)));
    await driver.start();
    expect((driver.sink as PostgresSink<Row>).activeMode).toBe("prepared");
    expect(driver.logger.entries.some((entry) => entry.message.includes("chose 'prepared'"))).toBe(true);
    await driver.close();
  });

  it("'prepared' on a server with max_prepared_transactions = 0 fails with a clear error", async () => {
    const error = await startError(new PostgresSink<Row>(options(plainUrl, { mode: "prepared" })));
    expect(error).toBeInstanceOf(PostgresConfigurationError);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as PostgresConfigurationError).code).toBe("CONFIGURATION");
    expect((error as PostgresConfigurationError).reason).toBe(
      PostgresErrorReason.preparedTransactionsDisabled,
    );
    expect((error as Error).message).toContain("max_prepared_transactions = 0");
    expect((error as Error).message).toContain("ALTER SYSTEM SET max_prepared_transactions");
    expect((error as Error).message).toContain("mode 'staging'");
  });

  it("a custom write with 'auto' on a server without prepared transactions says what to change", async () => {
    const error = await startError(
      new PostgresSink<Row>({ connection: plainUrl, sinkId: uniqueName("m"), write: async () => {} }),
    );
    expect((error as PostgresConfigurationError).reason).toBe(
      PostgresErrorReason.preparedTransactionsDisabled,
    );
  });
});

describe("PostgresSink configuration errors", () => {
  it("a missing table", async () => {
    const error = await startError(new PostgresSink<Row>(options(plainUrl, { table: "no_such_table_here" })));
    expect((error as PostgresConfigurationError).reason).toBe(PostgresErrorReason.tableNotFound);
    expect((error as Error).message).toContain('"public"."no_such_table_here" does not exist');
  });

  it("columns that do not match the table", async () => {
    const error = await startError(
      new PostgresSink<Row>(
        options(plainUrl, { columns: ["id", "payloadd"] } as Partial<PostgresSinkOptions<Row>>),
      ),
    );
    expect((error as PostgresConfigurationError).reason).toBe(PostgresErrorReason.columnMismatch);
    expect((error as Error).message).toContain('column "payloadd" does not exist');
    expect((error as Error).message).toContain('column "must" is NOT NULL without a default');
  });

  it("upsert conflict columns without a unique index", async () => {
    const error = await startError(
      new PostgresSink<Row>(
        options(plainUrl, { operation: { type: "upsert", conflictColumns: ["id"] } } as Partial<
          PostgresSinkOptions<Row>
        >),
      ),
    );
    expect((error as PostgresConfigurationError).reason).toBe(PostgresErrorReason.noUniqueConstraint);
  });

  it("permission denied", async () => {
    const url = new URL(plainUrl);
    url.username = role;
    const error = await startError(new PostgresSink<Row>(options(url.toString())));
    expect((error as PostgresConfigurationError).reason).toBe(PostgresErrorReason.permissionDenied);
    expect((error as Error).message).toContain(`GRANT INSERT ON "public"."${table}" TO ${role}`);
  });

  it("bad options fail in the constructor", () => {
    expect(() => new PostgresSink<Row>(options(plainUrl, { batchSize: 0 }))).toThrow(ConfigurationError);
    expect(() => new PostgresSink<Row>(options(plainUrl, { sinkId: "has-dash" }))).toThrow(/sinkId/);
    expect(
      () => new PostgresSink<Row>(options(plainUrl, { mode: "staging", write: async () => {} } as never)),
    ).toThrow(/custom write needs mode 'prepared'/);
    expect(
      () =>
        new PostgresSink<Row>(
          options(plainUrl, {
            operation: { type: "upsert", conflictColumns: ["nope"] },
          } as Partial<PostgresSinkOptions<Row>>),
        ),
    ).toThrow(/"nope" is not in 'columns'/);
  });

  it("two sinks with one sink id in one process are refused", async () => {
    const sinkId = uniqueName("dup");
    const first = new SinkDriver(new PostgresSink<Row>(options(plainUrl, { sinkId })));
    await first.start();
    const error = await startError(new PostgresSink<Row>(options(plainUrl, { sinkId })));
    expect((error as PostgresConfigurationError).reason).toBe(PostgresErrorReason.invalidSinkId);
    await first.close();
  });

  it("a newer attempt of the same job takes the sink id over from an older one that never closed", async () => {
    // The runtime gives up a close that hangs (a frozen process, a dead connection) after
    // 10 s and starts the next attempt, whose sink must not be refused as a duplicate of the old one.
    const sinkId = uniqueName("takeover");
    const older = new SinkDriver(new PostgresSink<Row>(options(plainUrl, { sinkId })), { incarnation: 1 });
    await older.start();
    const restarted = new SinkDriver(new PostgresSink<Row>(options(plainUrl, { sinkId })), {
      attemptNumber: 1,
      incarnation: 2,
    });
    await restarted.start();
    // The older attempt is fenced by the newer one's epoch; its late close does not free the newer claim.
    await older.close();
    const duplicate = await startError(new PostgresSink<Row>(options(plainUrl, { sinkId })), {
      attemptNumber: 1,
      incarnation: 2,
    });
    expect((duplicate as PostgresConfigurationError).reason).toBe(PostgresErrorReason.invalidSinkId);
    await restarted.close();
  });

  it("copies every kind of value faithfully (text escapes, NULL, bytea, jsonb, arrays, timestamps)", async () => {
    const typed = uniqueName("pgtypes");
    await sql(
      plainUrl,
      `CREATE TABLE ${typed} (id int, t text, b bytea, j jsonb, a text[], n int[], ts timestamptz, f boolean, big bigint)`,
    );
    try {
      const sinkId = uniqueName("t");
      const value = {
        id: 1,
        t: "tab\there\nnew line \\ backslash \r cr \u00e9 \\N",
        b: Buffer.from([0, 1, 2, 255]),
        j: { nested: { list: [1, "two", null] }, quote: "\"'" },
        a: ["x", null, 'q"uote', "back\\slash", "comma,brace}"],
        n: [1, 2, 3],
        ts: new Date("2024-02-29T12:34:56.789Z"),
        f: true,
        big: 9007199254740993n,
      };
      const nulls = { id: 2, t: null, b: null, j: null, a: null, n: null, ts: null, f: null, big: null };
      const driver = new SinkDriver(
        new PostgresSink<Record<string, unknown>>({
          connection: plainUrl,
          sinkId,
          table: typed,
          columns: ["id", "t", "b", "j", "a", "n", "ts", "f", "big"],
        }),
      );
      await driver.start();
      await driver.write(value, nulls);
      await driver.snapshot(1);
      await driver.complete(1);
      await driver.close();
      const rows = await sql(plainUrl, `SELECT * FROM ${typed} ORDER BY id`);
      expect(rows[0]).toEqual({ ...value, big: "9007199254740993" });
      expect(rows[1]).toEqual(nulls);
    } finally {
      await sql(plainUrl, `DROP TABLE IF EXISTS ${typed}`);
    }
  });
});
