import { PostgresSink } from "@onceflow/connector-postgres";
import { type CompletedCheckpoint, GeneratorSource, Job, MemoryCheckpointStorage } from "@onceflow/core";
import { describe, expect, it } from "vitest";
import {
  preparedGids,
  preparedPostgresUrl,
  sql,
  uniqueName,
} from "../../packages/connector-postgres/test/helpers/postgres.js";

/**
 * A late store never lands, with PostgresSink in prepared mode: checkpoint 2's store is slower than the
 * checkpoint timeout, so the attempt fails and the next one restores checkpoint 1 — then the late
 * store of 2 lands. Before the fix the next attempt's gid was the same `sinkId-subtask-2`, so the
 * stale handle's COMMIT PREPARED committed the new attempt's transaction: 5,008 or 5,001 rows, or
 * 4,999 (a lost record), for 5,000 ids, the job reporting success. Now gids carry the attempt's
 * epoch (the PostgreSQL part) and a timed-out checkpoint can never become restorable (core).
 */

const url = preparedPostgresUrl();

/** Stores checkpoint 2 only after 700 ms, once; logs what happened. */
class SlowOnceStorage extends MemoryCheckpointStorage {
  private slowed = false;
  readonly log: string[] = [];
  override async store(checkpoint: CompletedCheckpoint): Promise<void> {
    const id = checkpoint.metadata.checkpointId;
    if (id === 2 && !this.slowed) {
      this.slowed = true;
      this.log.push("store 2 delayed");
      await new Promise((resolve) => setTimeout(resolve, 700));
    }
    try {
      await super.store(checkpoint);
      this.log.push(`stored ${id}`);
    } catch (error) {
      this.log.push(`store ${id} failed`);
      throw error;
    }
  }
}

describe("a late store of a timed-out checkpoint with PostgresSink (prepared)", () => {
  it("every id exactly once, nothing left prepared", async () => {
    const table = uniqueName("late");
    await sql(url, `CREATE TABLE ${table} (id bigint NOT NULL)`);
    try {
      const storage = new SlowOnceStorage();
      const job = new Job({
        jobId: `late-${table}`,
        checkpointing: { interval: 1000, timeout: 300, storage },
        restartStrategy: { type: "fixed-delay", attempts: 3, delay: 50 },
      });
      job
        .fromSource(
          new GeneratorSource<number>({
            count: 5_000,
            splits: 1,
            generate: (i) => i,
            recordsPerSecond: 1_000,
          }),
          { uid: "src" },
        )
        .sinkTo(
          () =>
            new PostgresSink<number>({
              connection: url,
              mode: "prepared",
              sinkId: table,
              table,
              columns: ["id"],
              toRow: (i) => [i],
            }),
          { uid: "out" },
        );
      const outcome = await job.execute().then(
        (result) => `ok, ${result.restarts} restart(s)`,
        (error: unknown) => `failed: ${(error as { code?: string }).code}: ${(error as Error).message}`,
      );
      const [counts] = await sql<{ n: number; d: number }>(
        url,
        `SELECT count(*)::int AS n, count(DISTINCT id)::int AS d FROM ${table}`,
      );
      expect({ outcome: outcome.slice(0, 2), ...counts }, `${outcome}\n${storage.log.join(" | ")}`).toEqual({
        outcome: "ok",
        n: 5_000,
        d: 5_000,
      });
      expect(await preparedGids(url, table)).toEqual([]);
    } finally {
      // A failed assertion must not leave a prepared transaction locking the shared server's table.
      for (const gid of await preparedGids(url, table)) await sql(url, `ROLLBACK PREPARED '${gid}'`);
      await sql(url, `DROP TABLE IF EXISTS ${table}`);
    }
  });
});
