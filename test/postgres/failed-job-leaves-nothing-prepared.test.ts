import { PostgresSink } from "@onceflow/connector-postgres";
import { GeneratorSource, Job, MemoryCheckpointStorage, OnceflowError } from "@onceflow/core";
import pg from "pg";
import { describe, expect, it } from "vitest";
import {
  preparedGids,
  preparedPostgresUrl,
  sql,
  uniqueName,
} from "../../packages/connector-postgres/test/helpers/postgres.js";

/**
 * A job that fails for good must not leave a PREPAREd transaction of a checkpoint
 * that never completed: it holds a lock on the target table, and the user's fix (`ALTER TABLE …
 * DROP NOT NULL` after a NOT NULL violation) would wait for it forever.
 */

const url = preparedPostgresUrl();

interface Row {
  id: number;
  payload: string | null;
}

describe("a prepared-mode job that fails with RECORD_REJECTED", () => {
  it("leaves nothing prepared, so the user's ALTER TABLE runs at once", async () => {
    const table = uniqueName("fail");
    await sql(url, `CREATE TABLE ${table} (id bigint NOT NULL, payload text NOT NULL)`);
    try {
      const job = new Job({
        jobId: `fail-${table}`,
        parallelism: 2,
        checkpointing: { interval: 100, storage: new MemoryCheckpointStorage() },
        restartStrategy: { type: "fixed-delay", attempts: 3, delay: 50 },
      });
      job
        .fromSource(
          new GeneratorSource<Row>({
            count: 6_000,
            splits: 2,
            // Index 2_001 is in split 1 (odd indices): only subtask 1's batch is refused.
            generate: (i) => ({ id: i, payload: i === 2_001 ? null : `p${i}` }),
            recordsPerSecond: 4_000,
          }),
          { uid: "src" },
        )
        .sinkTo(
          () =>
            new PostgresSink<Row>({
              connection: url,
              mode: "prepared",
              sinkId: table,
              table,
              columns: ["id", "payload"],
              toRow: (row) => [row.id, row.payload],
              // Larger than a checkpoint interval's rows: every batch is sent at the pre-commit, so
              // subtask 1's refusal fails the checkpoint that subtask 0 has just prepared.
              batchSize: 10_000,
            }),
          { uid: "out" },
        );
      const error = await job.execute().then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(error).toBeInstanceOf(OnceflowError);
      expect((error as OnceflowError).code).toBe("RECORD_REJECTED");
      expect(await preparedGids(url, table)).toEqual([]);
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query("SET lock_timeout = '3s'");
        await client.query(`ALTER TABLE ${table} ALTER COLUMN payload DROP NOT NULL`);
      } finally {
        await client.end();
      }
    } finally {
      // A failed assertion must not leave a prepared transaction locking the shared server's table.
      for (const gid of await preparedGids(url, table)) await sql(url, `ROLLBACK PREPARED '${gid}'`);
      await sql(url, `DROP TABLE IF EXISTS ${table}`);
    }
  });
});
