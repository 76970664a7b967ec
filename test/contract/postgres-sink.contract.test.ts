import { PostgresSink } from "@onceflow/connector-postgres";
import type { TwoPhaseCommitSink } from "@onceflow/core";
import { describeTwoPhaseCommitSink, type TwoPhaseCommitSinkContract } from "@onceflow/testkit/vitest";
import { type KillablePool, killablePool, postgresUrl, sql } from "./helpers/services.js";

// The contract suite on PostgresSink against the run's PostgreSQL, in both modes: prepared
// transactions and the staging table. Each case has its own table and sinkId; each sink instance
// its own pool, so a simulated kill cuts exactly that instance's connections (the server rolls back
// their open transactions; prepared ones stay, as after a SIGKILL).

interface Row {
  readonly id: number;
  readonly payload: string;
}

function contract(mode: "prepared" | "staging", backgroundCommits = false): TwoPhaseCommitSinkContract<Row> {
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
      return sink as unknown as TwoPhaseCommitSink<Row, unknown>;
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
  };
}

describeTwoPhaseCommitSink(contract("prepared"));
describeTwoPhaseCommitSink(contract("staging"));
describeTwoPhaseCommitSink(contract("staging", true));
