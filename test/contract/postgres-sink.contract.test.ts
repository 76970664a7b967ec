import { createHash } from "node:crypto";
import { PostgresSink } from "@onceflow/connector-postgres";
import { describeTwoPhaseCommitSink, type TwoPhaseCommitSinkContract } from "@onceflow/testkit/vitest";
import { type KillablePool, killablePool, postgresUrl, sql } from "./helpers/services.js";

// The contract suite on PostgresSink against the run's PostgreSQL, in both modes: prepared
// transactions and the staging table. Each case has its own table and sinkId; each sink instance
// its own pool, so a simulated kill cuts exactly that instance's connections (the server rolls back
// their open transactions; prepared ones stay, as after a SIGKILL). After each case nothing of the
// sink may be left: no prepared transaction with its sinkId's gid prefix, no staging table.

interface Row {
  readonly id: number;
  readonly payload: string;
}

/** What the sink `sinkId` left in the server: prepared gids `<sinkId>-…` and its staging tables. */
async function lingering(sinkId: string): Promise<string[]> {
  // Staging tables are `onceflow_stage_<first 12 hex of sha256(sinkId)>_<subtask>_<epoch>_<sequence>`.
  const stagePrefix = `onceflow_stage_${createHash("sha256").update(sinkId).digest("hex").slice(0, 12)}_`;
  const prepared = await sql<{ gid: string }>(
    postgresUrl(),
    "SELECT gid FROM pg_prepared_xacts WHERE left(gid, length($1)) = $1 ORDER BY gid",
    [`${sinkId}-`],
  );
  const staged = await sql<{ name: string }>(
    postgresUrl(),
    "SELECT schemaname || '.' || tablename AS name FROM pg_tables WHERE left(tablename, length($1)) = $1 ORDER BY 1",
    [stagePrefix],
  );
  return [
    ...prepared.map((row) => `prepared transaction '${row.gid}'`),
    ...staged.map((row) => `staging table ${row.name}`),
  ];
}

function contract(
  mode: "prepared" | "staging",
  backgroundCommits = false,
): TwoPhaseCommitSinkContract<Row, PostgresSink<Row>> {
  const pools = new WeakMap<object, KillablePool>();
  const cleanup = new Map<string, KillablePool[]>();
  return {
    name: `PostgresSink (${mode}${backgroundCommits ? ", backgroundCommits" : ""})`,
    setup: async (scope) => {
      await sql(postgresUrl(), `CREATE TABLE ${scope.id} (id bigint NOT NULL, payload text NOT NULL)`);
    },
    teardown: async (scope) => {
      for (const pool of cleanup.get(scope.id) ?? []) await pool.end();
      cleanup.delete(scope.id);
      await sql(postgresUrl(), `DROP TABLE IF EXISTS ${scope.id}`);
    },
    createSink: (scope) => {
      const pool = killablePool(postgresUrl());
      cleanup.set(scope.id, [...(cleanup.get(scope.id) ?? []), pool]);
      const sink = new PostgresSink<Row>({
        pool: pool.pool,
        mode,
        table: scope.id,
        columns: ["id", "payload"],
        toRow: (row) => [row.id, row.payload],
        sinkId: scope.id,
        // Small batches: rows reach the server inside the transaction before the barrier.
        batchSize: 3,
        commitRetry: { initialDelay: 20, maxDelay: 500 },
        backgroundCommits,
      });
      pools.set(sink, pool);
      return sink;
    },
    kill: async (sink) => {
      const pool = pools.get(sink);
      if (pool === undefined) return;
      await pool.kill();
      // The sink registers its sinkId in a process-wide set that a SIGKILL would wipe; close() is
      // the only way to drop it. The suite made every step of the dead instance throw: no abort runs.
      await sink.close();
    },
    readCommitted: (scope) => sql<Row>(postgresUrl(), `SELECT id::int AS id, payload FROM ${scope.id}`),
    createRecord: (index) => ({ id: index, payload: `row ${index}` }),
    identify: (row) => `${row.id}:${row.payload}`,
    lingering: (scope) => lingering(scope.id),
  };
}

describeTwoPhaseCommitSink(contract("prepared"));
describeTwoPhaseCommitSink(contract("staging"));
describeTwoPhaseCommitSink(contract("staging", true));
