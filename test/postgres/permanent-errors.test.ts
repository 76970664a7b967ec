import { readFile, writeFile } from "node:fs/promises";
import {
  PostgresCheckpointStorage,
  PostgresConfigurationError,
  PostgresRecordRejectedError,
  PostgresSink,
} from "@onceflow/connector-postgres";
import {
  createMemoryLogger,
  GeneratorSource,
  Job,
  MemoryCheckpointStorage,
  OnceflowError,
} from "@onceflow/core";
import { type PostgresService, startPostgres } from "@onceflow/testkit";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  preparedGids,
  preparedPostgresUrl,
  sql,
  uniqueName,
} from "../../packages/connector-postgres/test/helpers/postgres.js";

/**
 * Failures that can never succeed must not be retried by the restart strategy.
 * A NOT NULL violation fails the job at once with RECORD_REJECTED naming the row and the column; a
 * wrong password fails it at once with CONFIGURATION.
 */

const url = preparedPostgresUrl();

interface Row {
  id: number;
  payload: string | null;
}

/** Runs a job whose record `badId` has a NULL payload; returns its error and how many attempts ran. */
async function runWithBadRecord(mode: "prepared" | "staging", table: string, badId: number) {
  const logger = createMemoryLogger();
  const job = new Job({
    jobId: `rej-${table}`,
    logger,
    checkpointing: { interval: 200, storage: new MemoryCheckpointStorage() },
    restartStrategy: { type: "fixed-delay", attempts: 5, delay: 50 },
  });
  job
    .fromSource(
      new GeneratorSource<Row>({
        count: 3_000,
        splits: 1,
        generate: (i) => ({ id: i, payload: i === badId ? null : `p${i}` }),
        recordsPerSecond: 3_000,
      }),
      { uid: "src" },
    )
    .sinkTo(
      () =>
        new PostgresSink<Row>({
          connection: url,
          mode,
          sinkId: table,
          table,
          columns: ["id", "payload"],
          toRow: (row) => [row.id, row.payload],
          batchSize: 100,
        }),
      { uid: "out" },
    );
  const error = await job.execute().then(
    () => undefined,
    (caught: unknown) => caught,
  );
  const restarts = logger.entries.filter((entry) => entry.message === "job attempt failed").length;
  return { error, restarts };
}

describe.each(["prepared", "staging"] as const)("a row PostgreSQL refuses for good (%s mode)", (mode) => {
  it("fails the job at once with RECORD_REJECTED naming the row and the column (23502)", async () => {
    const table = uniqueName("rej");
    await sql(url, `CREATE TABLE ${table} (id bigint NOT NULL, payload text NOT NULL)`);
    try {
      const { error, restarts } = await runWithBadRecord(mode, table, 1_234);
      expect(restarts).toBe(0);
      expect(error).toBeInstanceOf(PostgresRecordRejectedError);
      const rejected = error as PostgresRecordRejectedError;
      expect(rejected.code).toBe("RECORD_REJECTED");
      expect(rejected.details).toMatchObject({
        sqlState: "23502",
        column: "payload",
        row: { id: 1_234, payload: null },
      });
      expect(rejected.details.table).toContain(table);
      expect(rejected.message).toContain('column "payload"');
      expect(rejected.message).toContain('"id":1234');
    } finally {
      // A failed assertion must not leave a prepared transaction locking the shared server's table.
      for (const gid of await preparedGids(url, table)) await sql(url, `ROLLBACK PREPARED '${gid}'`);
      await sql(url, `DROP TABLE IF EXISTS ${table}`);
    }
  });
});

describe("a login PostgreSQL refuses (28P01)", () => {
  let server: PostgresService;
  let wrongPassword: string;

  beforeAll(async () => {
    server = await startPostgres({ faultInjection: true, maxPreparedTransactions: 8 });
    const admin = new pg.Client({ connectionString: server.connectionString });
    await admin.connect();
    try {
      await admin.query("CREATE ROLE onceflow_app LOGIN SUPERUSER PASSWORD 'the-right-password'");
      await admin.query("CREATE TABLE logins (id bigint NOT NULL)");
      const hba = (await admin.query<{ hba_file: string }>("SHOW hba_file")).rows[0]!.hba_file;
      // The role must give its password (the rest of the server stays on trust).
      const rules = await readFile(hba, "utf8");
      await writeFile(hba, `host all onceflow_app 127.0.0.1/32 scram-sha-256\n${rules}`);
      await admin.query("SELECT pg_reload_conf()");
    } finally {
      await admin.end();
    }
    const address = new URL(server.connectionString);
    wrongPassword = `postgresql://onceflow_app:a-wrong-password@127.0.0.1:${address.port}${address.pathname}`;
  }, 180_000);

  afterAll(async () => {
    await server?.stop();
  });

  it("fails the job at once with CONFIGURATION, never restarting", async () => {
    const logger = createMemoryLogger();
    const job = new Job({
      jobId: "wrong-password",
      logger,
      checkpointing: { interval: 200, storage: new MemoryCheckpointStorage() },
      restartStrategy: { type: "fixed-delay", attempts: 5, delay: 50 },
    });
    job
      .fromSource(new GeneratorSource<number>({ count: 100, splits: 1, generate: (i) => i }), { uid: "src" })
      .sinkTo(
        () =>
          new PostgresSink<number>({
            connection: wrongPassword,
            mode: "prepared",
            table: "logins",
            columns: ["id"],
            toRow: (id) => [id],
          }),
        { uid: "out" },
      );
    const error = await job.execute().then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(logger.entries.filter((entry) => entry.message === "job attempt failed")).toEqual([]);
    expect(error).toBeInstanceOf(PostgresConfigurationError);
    expect((error as PostgresConfigurationError).code).toBe("CONFIGURATION");
    expect((error as PostgresConfigurationError).reason).toBe("AUTHENTICATION_FAILED");
    expect((error as Error).message).toContain("28P01");
    expect((error as Error).message).not.toContain("a-wrong-password");
  });

  it("the checkpoint storage says CONFIGURATION too", async () => {
    const storage = new PostgresCheckpointStorage({ connection: wrongPassword });
    try {
      const error = await storage.list("any").then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(error).toBeInstanceOf(OnceflowError);
      expect((error as OnceflowError).code).toBe("CONFIGURATION");
    } finally {
      await storage.close();
    }
  });
});
