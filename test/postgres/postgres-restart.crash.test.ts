import { PostgresSink } from "@onceflow/connector-postgres";
import { type PostgresService, startPostgres } from "@onceflow/testkit";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SinkDriver } from "../../packages/connector-postgres/test/helpers/sink-driver.js";
import { runFixture } from "./crash-helpers.js";

/**
 * PostgreSQL itself crashes (`pg_ctl stop -m immediate`) while the sink has transactions prepared
 * or rows staged: after the restart every row is committed exactly once. Uses a private server
 * from the testkit, never the shared one.
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

beforeAll(async () => {
  server = await startPostgres({ faultInjection: true, maxPreparedTransactions: 16 });
}, 180_000);

afterAll(async () => {
  await server?.stop();
});

interface Row {
  id: number;
  payload: string;
}

describe.each(["prepared", "staging"] as const)(
  "PostgresSink (%s mode) across an immediate PostgreSQL restart",
  (mode) => {
    it("commits what was pre-committed before the crash, exactly once", async () => {
      const table = `restart_${mode}`;
      await query(`CREATE TABLE ${table} (id bigint NOT NULL, payload text)`);
      const sink = new PostgresSink<Row>({
        connection: server.connectionString,
        mode,
        sinkId: `restart_${mode}`,
        table,
        columns: ["id", "payload"],
        batchSize: 100,
        commitRetry: { maxAttempts: 30, initialDelay: 100, maxDelay: 1000 },
      });
      const driver = new SinkDriver(sink);
      await driver.start();
      const rows = Array.from({ length: 1000 }, (_, id) => ({ id, payload: `p${id}` }));
      await driver.write(...rows.slice(0, 600));
      await driver.snapshot(1);
      if (mode === "prepared") {
        expect(await query("SELECT gid FROM pg_prepared_xacts")).toEqual([{ gid: "restart_prepared-0-1-1" }]);
      }
      await server.restart({ immediate: true });
      if (mode === "prepared") {
        expect(await query("SELECT gid FROM pg_prepared_xacts")).toEqual([{ gid: "restart_prepared-0-1-1" }]);
      }
      // The pool's connections died with the server: the commit retries on fresh ones.
      await driver.complete(1);
      await driver.close();
      const counts = await query<{ n: string; d: string }>(
        `SELECT count(*) AS n, count(DISTINCT id) AS d FROM ${table}`,
      );
      expect(counts).toEqual([{ n: "600", d: "600" }]);
      expect(await query("SELECT gid FROM pg_prepared_xacts")).toEqual([]);
    });

    it("a job killed while prepared/staged, with PostgreSQL crashing too, reruns to exactly once", async () => {
      const table = `restart_job_${mode}`;
      await query(`CREATE TABLE ${table} (id bigint NOT NULL, payload text NOT NULL)`);
      const env = {
        PG_URL: server.connectionString,
        TABLE: table,
        MODE: mode,
        JOB_ID: `restart-job-${mode}`,
        COUNT: "2000",
      };
      const crashed = runFixture({ ...env, CRASH_AT: "before-commit", CRASH_CHECKPOINT: "2" });
      await crashed.waitFor("ONCEFLOW-PHASE");
      await server.restart({ immediate: true });
      crashed.child.kill("SIGKILL");
      await crashed.exited;
      const rerun = runFixture(env);
      await rerun.waitFor("ONCEFLOW-DONE", 120_000).catch((error: unknown) => {
        throw new Error(`${String(error)}\n${rerun.output()}`);
      });
      expect((await rerun.exited).code, rerun.output()).toBe(0);
      const counts = await query<{ n: string; d: string }>(
        `SELECT count(*) AS n, count(DISTINCT id) AS d FROM ${table}`,
      );
      expect(counts).toEqual([{ n: "2000", d: "2000" }]);
      expect(await query("SELECT gid FROM pg_prepared_xacts")).toEqual([]);
    });
  },
);
