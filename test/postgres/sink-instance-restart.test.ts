import { PostgresSink } from "@onceflow/connector-postgres";
import { GeneratorSource, Job, MemoryCheckpointStorage } from "@onceflow/core";
import { describe, expect, it } from "vitest";
import {
  preparedGids,
  preparedPostgresUrl,
  sql,
  uniqueName,
} from "../../packages/connector-postgres/test/helpers/postgres.js";

/**
 * A PostgresSink passed as an instance (the README's pattern, not a factory) is
 * reused by the job's in-process restart. Its `close()` ends the attempt's pool; the next attempt
 * must open a new one (and a new epoch) instead of failing with "Cannot use a pool after calling
 * end on the pool".
 */

const url = preparedPostgresUrl();

describe.each(["prepared", "staging"] as const)(
  "a PostgresSink instance across an in-process restart (%s)",
  (mode) => {
    it("the restarted attempt writes with a fresh pool: every record exactly once, nothing left prepared", async () => {
      const table = uniqueName("inst");
      await sql(url, `CREATE TABLE ${table} (id bigint NOT NULL)`);
      try {
        let failedOnce = false;
        const job = new Job({
          jobId: `inst-${table}`,
          checkpointing: { interval: 100, storage: new MemoryCheckpointStorage() },
          restartStrategy: { type: "fixed-delay", attempts: 3, delay: 50 },
        });
        const sink = new PostgresSink<number>({
          connection: url,
          mode,
          sinkId: table,
          table,
          columns: ["id"],
          toRow: (i) => [i],
        });
        job
          .fromSource(
            new GeneratorSource<number>({
              count: 2_000,
              splits: 1,
              generate: (i) => i,
              recordsPerSecond: 4_000,
            }),
            { uid: "src" },
          )
          .map((i) => {
            if (i === 1_000 && !failedOnce) {
              failedOnce = true;
              throw new Error("a transient failure");
            }
            return i;
          })
          .sinkTo(sink, { uid: "out" });
        const result = await job.execute();
        expect(result.restarts).toBe(1);
        const [counts] = await sql<{ n: number; d: number }>(
          url,
          `SELECT count(*)::int AS n, count(DISTINCT id)::int AS d FROM ${table}`,
        );
        expect(counts).toEqual({ n: 2_000, d: 2_000 });
        expect(await preparedGids(url, table)).toEqual([]);
      } finally {
        // A failed assertion must not leave a prepared transaction locking the shared server's table.
        for (const gid of await preparedGids(url, table)) await sql(url, `ROLLBACK PREPARED '${gid}'`);
        await sql(url, `DROP TABLE IF EXISTS ${table}`);
      }
    });
  },
);
