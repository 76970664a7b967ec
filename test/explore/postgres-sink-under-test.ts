import type { PostgresSink } from "@onceflow/connector-postgres";
import pg from "pg";
import { preparedGids, sql, uniqueName } from "../../packages/connector-postgres/test/helpers/postgres.js";
import { gatedDeferredSink } from "../../packages/core/test/explore/gated-sink.js";
import type { ProcessGate } from "../../packages/core/test/explore/process-gate.js";
import type { SinkHost, SinkUnderTest } from "../../packages/core/test/explore/sink-under-test.js";
import { connectorOfProcess } from "./connector-per-process.js";

/**
 * The real {@link PostgresSink} in prepared mode on the shared PostgreSQL, a fresh table per case,
 * each sink instance behind its process's gate. A killed process's sessions are terminated on the
 * server (as SIGKILL drops its connections: open transactions roll back, prepared ones stay), and
 * nothing the process was still doing reaches the server afterwards (see {@link clientOfProcess}). Visible
 * is what a fresh connection selects; left over is every gid of the sink still prepared.
 *
 * @example
 * ```ts
 * await explore({ target: () => postgresSinkUnderTest(url), runs: 10 });
 * ```
 */
export async function postgresSinkUnderTest(url: string): Promise<SinkUnderTest> {
  const table = uniqueName("explore");
  await sql(url, `CREATE TABLE ${table} (id bigint NOT NULL)`);
  const sessionsOf = (host: SinkHost) => `${table}_${host.name}`.slice(0, 63);
  const terminate = (pattern: string) =>
    sql(url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE $1", [
      pattern,
    ]);
  return {
    name: "postgres",
    // A real server on a loaded 2-core machine: a final phase takes seconds, not milliseconds.
    finalPhaseLimitMs: 60_000,
    createSink(host) {
      const connection = `${url}${url.includes("?") ? "&" : "?"}application_name=${sessionsOf(host)}`;
      const making = connectorOfProcess<{ PostgresSink: typeof PostgresSink }>(
        "@onceflow/connector-postgres",
        host.name,
      ).then(
        ({ PostgresSink: PostgresSinkOfProcess }) =>
          new PostgresSinkOfProcess<number>({
            connection: { connectionString: connection, Client: clientOfProcess(host.gate) },
            mode: "prepared",
            sinkId: table,
            table,
            columns: ["id"],
            toRow: (value) => [value],
            commitRetry: { maxAttempts: 3, initialDelay: 5 },
          }),
      );
      return gatedDeferredSink(making, host.gate);
    },
    async visible() {
      return (await sql<{ id: string }>(url, `SELECT id FROM ${table}`)).map((row) => Number(row.id));
    },
    async leftovers() {
      return (await preparedGids(url, table)).map((gid) => `prepared ${gid}`);
    },
    async processKilled(host) {
      await terminate(sessionsOf(host));
    },
    async close() {
      await terminate(`${table}%`);
      for (const gid of await preparedGids(url, table)) await sql(url, `ROLLBACK PREPARED '${gid}'`);
      await sql(url, `DROP TABLE IF EXISTS ${table}`);
    },
  };
}

/**
 * The `pg` client class of one explored process: once its gate is killed, connecting and querying
 * never settle, as in a process that SIGKILL stopped. The gate alone stops a killed process only at
 * its next sink call: a call already running goes on. Under load a process killed while
 * its sink was starting went on after its sessions were terminated — new connections, an epoch bump
 * after its replacement's, and a rollback of the gid its replacement had prepared for a stored
 * checkpoint — so the final phase failed with TRANSACTION_TIMED_OUT (rows LOST), which a killed
 * process can never cause. A frozen process does go on afterwards, as a zombie: the gate models that.
 */
function clientOfProcess(gate: ProcessGate): typeof pg.Client {
  const never = () => new Promise<never>(() => undefined);
  class ClientOfProcess extends pg.Client {}
  const prototype = ClientOfProcess.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
  const base = pg.Client.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
  for (const method of ["connect", "query"]) {
    prototype[method] = function (this: pg.Client, ...args: unknown[]) {
      return gate.isKilled ? never() : base[method]!.apply(this, args);
    };
  }
  return ClientOfProcess;
}
