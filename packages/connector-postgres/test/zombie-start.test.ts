import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import type { PostgresSink } from "@onceflow/connector-postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { preparedPostgresUrl, sql, uniqueName } from "./helpers/postgres.js";
import { SinkDriver } from "./helpers/sink-driver.js";

// A zombie: a process of an older incarnation, frozen after its incarnation claim and before its
// sink started, resumes after a newer process started its sink and prepared a checkpoint. Within
// the runtime's incarnation series the zombie's start is refused and the newer process goes on
// unfenced. Without a series (a context made by hand) the zombie's start raises the epoch (fencing
// the newer process, which restarts), but it must not roll back or drop what the newer process
// prepared: the next attempt restores that checkpoint and commits it.
const url = preparedPostgresUrl();
const table = uniqueName("zombie_start");
beforeAll(() => sql(url, `CREATE TABLE ${table} (id bigint NOT NULL)`));
afterAll(() => sql(url, `DROP TABLE IF EXISTS ${table}`));

// Each "process" loads its own copy of the connector, as separate processes would (the module keeps
// a registry of the sinks running in the process).
async function sinkOfProcess(name: string): Promise<typeof PostgresSink> {
  const entry = createRequire(import.meta.url)
    .resolve("@onceflow/connector-postgres")
    .replace(/\.cjs$/, ".js");
  return (
    (await import(`${pathToFileURL(entry).href}?process=${name}`)) as { PostgresSink: typeof PostgresSink }
  ).PostgresSink;
}

describe.each(["prepared", "staging"] as const)("a zombie's sink start (%s mode)", (mode) => {
  const options = (sinkId: string) => ({
    connection: url,
    mode,
    sinkId,
    table,
    columns: ["id"],
    toRow: (value: number) => [value],
    commitRetry: { maxAttempts: 1 },
  });

  it("is refused within the runtime's incarnation series, and the newer process commits without a restart", async () => {
    const sinkId = uniqueName(`zs_${mode}`);
    const ids = mode === "prepared" ? [21, 22, 23] : [31, 32, 33];
    const incarnationSeries = { series: `series-${sinkId}`, newest: 5 };
    const newer = new SinkDriver(new (await sinkOfProcess(`${sinkId}-newer`))<number>(options(sinkId)), {
      incarnation: 5,
      incarnationSeries,
    });
    await newer.start();
    await newer.write(...ids);
    await newer.snapshot(1);
    for (const incarnation of [3, 4]) {
      const zombie = new SinkDriver(
        new (await sinkOfProcess(`${sinkId}-zombie-${incarnation}`))<number>(options(sinkId)),
        { incarnation, incarnationSeries },
      );
      await expect(zombie.start()).rejects.toMatchObject({
        code: "SUPERSEDED",
        message: expect.stringContaining(
          `incarnation ${incarnation} of job 'test-job' cannot start: incarnation 5`,
        ),
      });
      await zombie.close();
    }
    // The epoch is still the one the newer process started: its commit goes through.
    expect(
      await sql(url, "SELECT epoch::int FROM onceflow_sink_epochs WHERE sink_id = $1", [sinkId]),
    ).toEqual([{ epoch: 1 }]);
    await newer.complete(1);
    const rows = await sql<{ id: string }>(url, `SELECT id FROM ${table} WHERE id = ANY($1) ORDER BY id`, [
      ids,
    ]);
    expect(rows.map((row) => Number(row.id))).toEqual(ids);
    await newer.close();
    const prepared = await sql(url, "SELECT gid FROM pg_prepared_xacts WHERE left(gid, length($1)) = $1", [
      `${sinkId}-`,
    ]);
    expect(prepared).toEqual([]);
  });

  it("without an incarnation series, leaves what a newer incarnation prepared for the attempt that restores it", async () => {
    const sinkId = uniqueName(`z_${mode}`);
    const ids = [mode === "prepared" ? 1 : 11, mode === "prepared" ? 2 : 12, mode === "prepared" ? 3 : 13];
    // The newer process (incarnation 5) prepares checkpoint 1, stores it, and dies before the commit.
    const newer = new SinkDriver(new (await sinkOfProcess(`${sinkId}-newer`))<number>(options(sinkId)), {
      incarnation: 5,
    });
    await newer.start();
    await newer.write(...ids);
    const checkpoint = await newer.snapshot(1);
    // Two zombies (incarnations 3 and 4, claimed before the newer one) start their sinks only now,
    // the oldest first: the second must still see that the newer process started epoch 1.
    const zombies: SinkDriver<number>[] = [];
    for (const incarnation of [3, 4]) {
      const zombie = new SinkDriver(
        new (await sinkOfProcess(`${sinkId}-zombie-${incarnation}`))<number>(options(sinkId)),
        { incarnation },
      );
      await zombie.start();
      zombies.push(zombie);
    }
    // The next process (incarnation 6) restores the newer one's checkpoint: every row, once.
    const next = new SinkDriver(new (await sinkOfProcess(`${sinkId}-next`))<number>(options(sinkId)), {
      incarnation: 6,
    });
    await next.start(checkpoint);
    const rows = await sql<{ id: string }>(url, `SELECT id FROM ${table} WHERE id = ANY($1) ORDER BY id`, [
      ids,
    ]);
    expect(rows.map((row) => Number(row.id))).toEqual(ids);
    // And it cleaned up after the zombie: nothing of this sink stays prepared or staged.
    const prepared = await sql(url, "SELECT gid FROM pg_prepared_xacts WHERE left(gid, length($1)) = $1", [
      `${sinkId}-`,
    ]);
    expect(prepared).toEqual([]);
    await next.close();
    // Each zombie said what it kept and why.
    for (const zombie of zombies) {
      expect(zombie.logger.entries.map((entry) => entry.message)).toContainEqual(
        expect.stringContaining(
          "kept the prepared transactions and staging tables of epochs that newer incarnations started",
        ),
      );
    }
  });
});

it("adds the bumps and job_id columns to an epoch table made before them, and records each bump's incarnation and the job", async () => {
  const epochTable = uniqueName("old_epochs");
  await sql(
    url,
    `CREATE TABLE ${epochTable} (sink_id text NOT NULL, subtask integer NOT NULL, epoch bigint NOT NULL, PRIMARY KEY (sink_id, subtask))`,
  );
  try {
    const sinkId = uniqueName("z_old");
    const driver = new SinkDriver(
      new (await sinkOfProcess(`${sinkId}-old`))<number>({
        connection: url,
        mode: "prepared",
        sinkId,
        table,
        columns: ["id"],
        toRow: (value: number) => [value],
        epochTable,
      }),
      { incarnation: 3 },
    );
    await driver.start();
    await driver.close();
    expect(
      await sql(url, `SELECT epoch::int, bumps, job_id FROM ${epochTable} WHERE sink_id = $1`, [sinkId]),
    ).toEqual([{ epoch: 1, bumps: [[1, 1, 3, null]], job_id: "test-job" }]);
  } finally {
    await sql(url, `DROP TABLE IF EXISTS ${epochTable}`);
  }
});
