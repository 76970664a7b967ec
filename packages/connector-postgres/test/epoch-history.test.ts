import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import {
  PostgresConfigurationError,
  type PostgresSink,
  PostgresSink as SinkOfThisProcess,
} from "@onceflow/connector-postgres";
import { GeneratorSource, Job, MemoryCheckpointStorage } from "@onceflow/core";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ControlTables } from "../src/sink/control-tables.js";
import { preparedGids, preparedPostgresUrl, sql, uniqueName } from "./helpers/postgres.js";
import { SinkDriver } from "./helpers/sink-driver.js";

// What the epoch row of a (sink, subtask) remembers, and who may use it: the incarnation series of
// the checkpoint storage (a reset storage counts from 1 again), a history whose length does not
// matter, and the job that uses the sink id.
const url = preparedPostgresUrl();
const table = uniqueName("epoch_history");
beforeAll(() => sql(url, `CREATE TABLE ${table} (id bigint PRIMARY KEY)`));
afterAll(async () => {
  for (const { gid } of await sql<{ gid: string }>(
    url,
    "SELECT gid FROM pg_prepared_xacts WHERE gid LIKE 'eh_%'",
  ))
    await sql(url, `ROLLBACK PREPARED '${gid}'`).catch(() => undefined);
  await sql(url, `DROP TABLE IF EXISTS ${table}`);
});

// Each "process" loads its own copy of the connector, as separate processes would.
async function sinkOfProcess(name: string): Promise<typeof PostgresSink> {
  const entry = createRequire(import.meta.url)
    .resolve("@onceflow/connector-postgres")
    .replace(/\.cjs$/, ".js");
  return (
    (await import(`${pathToFileURL(entry).href}?process=${name}`)) as { PostgresSink: typeof PostgresSink }
  ).PostgresSink;
}

const options = (sinkId: string) => ({
  connection: url,
  mode: "prepared" as const,
  sinkId,
  table,
  columns: ["id"],
  toRow: (value: number) => [value],
  lockTimeout: 1_000,
  commitRetry: { maxAttempts: 1 },
});

async function rowsBetween(from: number, to: number): Promise<number[]> {
  const rows = await sql<{ id: string }>(
    url,
    `SELECT id FROM ${table} WHERE id BETWEEN $1 AND $2 ORDER BY id`,
    [from, to],
  );
  return rows.map((row) => Number(row.id));
}

describe("PostgresSink after a reset of the checkpoint storage", () => {
  it.each([
    ["recorded with their series", { series: "before-reset" }, 100],
    ["recorded without a series (earlier versions)", undefined, 110],
  ])("rolls back the prepared transactions of the run before the reset (%s)", async (_, oldSeries, base) => {
    const ids = [base + 1, base + 2, base + 3];
    const sinkId = uniqueName("eh_reset");
    // The run before the reset: its storage had handed out 40 incarnations. It prepares checkpoint 7
    // and dies before COMMIT PREPARED.
    const old = new SinkDriver(new (await sinkOfProcess(`${sinkId}-old`))<number>(options(sinkId)), {
      incarnation: 40,
      ...(oldSeries === undefined ? {} : { incarnationSeries: oldSeries }),
    });
    await old.start();
    await old.write(...ids);
    await old.snapshot(7);
    expect(await preparedGids(url, sinkId)).toEqual([`${sinkId}-0-1-7`]);
    // The storage is reset: incarnations start again at 1, in a new series, and the job starts fresh.
    const fresh = new SinkDriver(new (await sinkOfProcess(`${sinkId}-fresh`))<number>(options(sinkId)), {
      incarnation: 1,
      incarnationSeries: { series: "after-reset", newest: 1 },
    });
    await fresh.start();
    expect(await preparedGids(url, sinkId)).toEqual([]);
    await fresh.write(...ids);
    await fresh.snapshot(1);
    await fresh.complete(1);
    await fresh.close();
    expect(await rowsBetween(base + 1, base + 3)).toEqual(ids);
    expect(fresh.logger.entries.filter((entry) => /kept the prepared/.test(entry.message))).toEqual([]);
  });
});

describe("a job on a new checkpoint storage", () => {
  it("rolls back what its run on the storage before left prepared, and writes its rows", async () => {
    const sinkId = uniqueName("eh_job");
    // The run before: its storage had handed out 40 incarnations; checkpoint 3 stays prepared.
    const old = new SinkDriver(new (await sinkOfProcess(`${sinkId}-old`))<number>(options(sinkId)), {
      jobId: "reset-job",
      incarnation: 40,
      incarnationSeries: { series: "the storage before" },
    });
    await old.start();
    await old.write(121, 122, 123);
    await old.snapshot(3);
    expect(await preparedGids(url, sinkId)).toHaveLength(1);
    // The job starts on a new storage (its incarnations start at 1); a lock left would fail it.
    const job = new Job({
      jobId: "reset-job",
      checkpointing: { interval: 100, storage: new MemoryCheckpointStorage() },
      restartStrategy: { type: "none" },
    });
    job
      .fromSource(new GeneratorSource({ count: 3, generate: (index) => 121 + index }), { uid: "in" })
      .sinkTo(() => new SinkOfThisProcess<number>(options(sinkId)), { uid: "out" });
    await job.execute();
    expect(await preparedGids(url, sinkId)).toEqual([]);
    expect(await rowsBetween(121, 123)).toEqual([121, 122, 123]);
  });
});

describe("PostgresSink epoch history", () => {
  it("a zombie that starts after its replacement restarted 100 times is refused and leaves what the replacement's checkpoint holds", async () => {
    const sinkId = uniqueName("eh_loop");
    const series = "loop";
    // The replacement (incarnation 6) prepares checkpoint 1, stores it, and dies before the commit.
    const replacement = new SinkDriver(new (await sinkOfProcess(`${sinkId}-r`))<number>(options(sinkId)), {
      incarnation: 6,
      incarnationSeries: { series, newest: 6 },
    });
    await replacement.start();
    await replacement.write(201, 202, 203);
    const checkpoint = await replacement.snapshot(1);
    // It crash-loops: each restart (incarnations 7 to 106) starts a new epoch, then dies before it
    // restores the checkpoint.
    const control = new ControlTables("public", "onceflow_sink_markers", "onceflow_sink_epochs");
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      for (let incarnation = 7; incarnation <= 106; incarnation++) {
        await control.bumpEpoch(client, sinkId, 0, 10_000, {
          jobId: "test-job",
          incarnation,
          series,
          newestIncarnation: async () => incarnation,
        });
      }
    } finally {
      await client.end();
    }
    // A zombie of incarnation 5, frozen since its claim, starts its sink only now: the bounded
    // history still knows that newer incarnations started epochs, so the start is refused and
    // changes nothing — not the epoch, not what the replacement prepared.
    const zombie = new SinkDriver(new (await sinkOfProcess(`${sinkId}-z`))<number>(options(sinkId)), {
      incarnation: 5,
      incarnationSeries: { series, newest: 106 },
    });
    await expect(zombie.start()).rejects.toMatchObject({ code: "SUPERSEDED" });
    expect(await preparedGids(url, sinkId)).toEqual([`${sinkId}-0-1-1`]);
    expect(
      await sql(url, "SELECT epoch::int FROM onceflow_sink_epochs WHERE sink_id = $1", [sinkId]),
    ).toEqual([{ epoch: 101 }]);
    await zombie.close();
    // The next restart restores the checkpoint and commits its transaction: every row, once.
    const next = new SinkDriver(new (await sinkOfProcess(`${sinkId}-n`))<number>(options(sinkId)), {
      incarnation: 107,
      incarnationSeries: { series, newest: 107 },
    });
    await next.start(checkpoint);
    await next.close();
    expect(await rowsBetween(201, 203)).toEqual([201, 202, 203]);
    expect(await preparedGids(url, sinkId)).toEqual([]);
    const [row] = await sql<{ length: number }>(
      url,
      "SELECT jsonb_array_length(bumps) AS length FROM onceflow_sink_epochs WHERE sink_id = $1",
      [sinkId],
    );
    expect(row?.length).toBeLessThanOrEqual(64);
  });
});

describe("PostgresSink sink id claimed by a job", () => {
  it("refuses a second job that uses the same sink id, naming both jobs, until the id is released", async () => {
    const sinkId = uniqueName("eh_claim");
    const first = new SinkDriver(new (await sinkOfProcess(`${sinkId}-a`))<number>(options(sinkId)), {
      jobId: "orders-enrich",
    });
    await first.start();
    await first.write(301);
    await first.snapshot(1);
    await first.complete(1);
    await first.close();
    const second = new SinkDriver(new (await sinkOfProcess(`${sinkId}-b`))<number>(options(sinkId)), {
      jobId: "orders-archive",
    });
    const refused = await second.start().then(
      () => undefined,
      (error: unknown) => error,
    );
    // Another copy of the connector (another "process"): its class, by name.
    expect((refused as Error).name).toBe(PostgresConfigurationError.name);
    expect(refused).toMatchObject({ code: "CONFIGURATION", reason: "SINK_ID_CLAIMED", setting: "sinkId" });
    const message = (refused as Error).message;
    expect(message).toContain('job "orders-enrich"');
    expect(message).toContain('job "orders-archive"');
    expect(message).toContain("sinkId");
    await second.close().catch(() => undefined);
    // The first job's rows and epoch are untouched; its own next start goes on.
    expect(await rowsBetween(301, 301)).toEqual([301]);
    const again = new SinkDriver(new (await sinkOfProcess(`${sinkId}-a2`))<number>(options(sinkId)), {
      jobId: "orders-enrich",
      incarnation: 2,
    });
    await again.start();
    await again.close();
    // Released as the message says (the first job is gone for good): the second job takes the id over.
    const release = /UPDATE .+$/.exec(message)?.[0];
    expect(release).toBeDefined();
    await sql(url, release as string);
    const taker = new SinkDriver(new (await sinkOfProcess(`${sinkId}-b2`))<number>(options(sinkId)), {
      jobId: "orders-archive",
      incarnation: 3,
    });
    await taker.start();
    await taker.write(302);
    await taker.snapshot(1);
    await taker.complete(1);
    await taker.close();
    expect(await rowsBetween(301, 302)).toEqual([301, 302]);
  });
});
