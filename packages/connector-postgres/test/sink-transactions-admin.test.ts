import { createHash } from "node:crypto";
import {
  listPostgresSinkIds,
  listPostgresSinkTransactions,
  PostgresSink,
  rollbackPostgresSinkTransactions,
} from "@onceflow/connector-postgres";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runPostgresCli } from "../src/cli/program.js";
import { preparedGids, preparedPostgresUrl, sql, uniqueName } from "./helpers/postgres.js";
import { SinkDriver } from "./helpers/sink-driver.js";

/**
 * `listPostgresSinkTransactions` / `rollbackPostgresSinkTransactions` and `onceflow-postgres
 * transactions list|rollback` against leftovers that real PostgresSinks leave when their process
 * dies after a pre-commit.
 */

interface Event {
  id: number;
  payload: string;
}

const url = preparedPostgresUrl();
const schema = uniqueName("admin");
const table = "events";
const sinkId = uniqueName("adm");
const otherSinkId = `${sinkId}_other`;
// A second database of the same server: a gid prepared there can only be rolled back from there.
const otherDatabase = uniqueName("admin_db");
const pool = new pg.Pool({ connectionString: url, max: 20 });
pool.on("error", () => undefined);

// The sink's sources, loaded beside the built package: a second module instance has its own
// registry of sinks, as another process would — the zombie's replacement runs there.
const { PostgresSink: ReplacementSink } = await import("../src/sink/postgres-sink.js");

const sinkFor = (id: string, mode: "prepared" | "staging", inAnotherProcess = false) =>
  new (inAnotherProcess ? ReplacementSink : PostgresSink)<Event>({
    pool,
    mode,
    sinkId: id,
    schema,
    table,
    columns: ["id", "payload"],
    toRow: (event) => [event.id, event.payload],
    batchSize: 1,
    commitRetry: { maxAttempts: 1 },
  });
const driverFor = (
  id: string,
  mode: "prepared" | "staging",
  subtaskIndex: number,
  inAnotherProcess = false,
) => new SinkDriver(sinkFor(id, mode, inAnotherProcess), { subtaskIndex, parallelism: 3 });
const events = (...ids: number[]) => ids.map((id) => ({ id, payload: `p${id}` }));
const stagingTables = async (id: string) =>
  (
    await sql<{ name: string }>(
      url,
      `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind = 'r' AND n.nspname = $1 AND c.relname LIKE 'onceflow_stage_%' ORDER BY 1`,
      [schema],
    )
  )
    .map((row) => row.name)
    .filter((name) => stagingOf(id, name));
// As the README documents the names: onceflow_stage_<first 12 hex digits of sha256(sinkId)>_….
const stagingOf = (id: string, name: string) =>
  name.startsWith(`onceflow_stage_${createHash("sha256").update(id).digest("hex").slice(0, 12)}_`);
const otherDatabaseUrl = () => {
  const parsed = new URL(url);
  parsed.pathname = `/${otherDatabase}`;
  return parsed.toString();
};

async function cli(...args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runPostgresCli(args, {
    stdout: (text) => out.push(text),
    stderr: (text) => err.push(text),
  });
  return { code, out: out.join(""), err: err.join("") };
}

beforeAll(async () => {
  await sql(url, `CREATE SCHEMA ${schema}`);
  await sql(url, `CREATE TABLE ${schema}.${table} (id bigint NOT NULL, payload text)`);
  await sql(url, `CREATE DATABASE ${otherDatabase}`);

  // Subtask 0 (prepared): checkpoint 1 committed, checkpoint 2 pre-committed, then the process dies.
  const zero = driverFor(sinkId, "prepared", 0);
  await zero.start();
  await zero.write(...events(1, 2));
  await zero.snapshot(1);
  await zero.complete(1);
  await zero.write(...events(3));
  await zero.snapshot(2);
  // Subtask 1 (prepared): checkpoint 1 pre-committed, then the process dies.
  const one = driverFor(sinkId, "prepared", 1);
  await one.start();
  await one.write(...events(10));
  await one.snapshot(1);
  // Subtask 2 (staging): a zombie of epoch 1 keeps staging rows after its replacement (epoch 2)
  // recovered and committed a checkpoint: the zombie's staging tables are superseded.
  const zombie = driverFor(sinkId, "staging", 2);
  await zombie.start();
  await zombie.write(...events(20));
  await zombie.snapshot(1);
  const replacement = driverFor(sinkId, "staging", 2, true);
  await replacement.start();
  await replacement.write(...events(30));
  await replacement.snapshot(1);
  await replacement.complete(1);
  await replacement.close();
  await zombie.write(...events(21));
  await zombie.snapshot(2);
  // A gid in the older form without an epoch for subtask 0: a later epoch committed since.
  const old = await pool.connect();
  try {
    await old.query("BEGIN");
    await old.query(`PREPARE TRANSACTION '${sinkId}-0-7'`);
  } finally {
    old.release();
  }
  // A gid of subtask 1 prepared in another database.
  const elsewhere = new pg.Client({ connectionString: otherDatabaseUrl() });
  await elsewhere.connect();
  try {
    await elsewhere.query("BEGIN");
    await elsewhere.query(`PREPARE TRANSACTION '${sinkId}-1-1-9'`);
  } finally {
    await elsewhere.end();
  }
  // Another sink (prefix-sharing id) with a prepared transaction and a staging table: never touched.
  const other = driverFor(otherSinkId, "prepared", 0);
  await other.start();
  await other.write(...events(100));
  await other.snapshot(1);
  const otherStaged = driverFor(otherSinkId, "staging", 1);
  await otherStaged.start();
  await otherStaged.write(...events(101));
  await otherStaged.snapshot(1);
});

afterAll(async () => {
  for (const id of [sinkId, otherSinkId]) {
    await rollbackPostgresSinkTransactions({ pool, sinkId: id, all: true, jobStopped: true }).catch(
      () => undefined,
    );
  }
  await pool.end();
  await sql(url, `DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await sql(url, `DROP DATABASE IF EXISTS ${otherDatabase}`);
});

describe("a PostgresSink's lingering work, by sink id", () => {
  it("lists the sink's prepared transactions (every database) and staging tables, and tells superseded ones", async () => {
    const found = await listPostgresSinkTransactions({ connection: url, sinkId, controlSchema: schema });
    expect(
      found.prepared.map(({ gid, subtask, epoch, checkpointId, database, superseded }) => ({
        gid,
        subtask,
        epoch,
        checkpointId,
        elsewhere: database === otherDatabase,
        superseded,
      })),
    ).toEqual([
      // Superseded: subtask 0 committed checkpoint 1 in epoch 1, after this pre-0.2 gid.
      {
        gid: `${sinkId}-0-7`,
        subtask: 0,
        epoch: undefined,
        checkpointId: 7,
        elsewhere: false,
        superseded: true,
      },
      // Pending: the restore of checkpoint 2 would commit it.
      { gid: `${sinkId}-0-1-2`, subtask: 0, epoch: 1, checkpointId: 2, elsewhere: false, superseded: false },
      { gid: `${sinkId}-1-1-1`, subtask: 1, epoch: 1, checkpointId: 1, elsewhere: false, superseded: false },
      { gid: `${sinkId}-1-1-9`, subtask: 1, epoch: 1, checkpointId: 9, elsewhere: true, superseded: false },
    ]);
    // The zombie's (epoch 1); its replacement (epoch 2) committed and left nothing staged.
    expect(found.staging.length).toBeGreaterThanOrEqual(1);
    for (const staged of found.staging) {
      expect(staged).toMatchObject({ schema, subtask: 2, epoch: 1, superseded: true });
    }
    expect(found.staging.map((staged) => staged.table).sort()).toEqual(await stagingTables(sinkId));
    // Another sink's, listed by its own id only.
    const other = await listPostgresSinkTransactions({
      connection: url,
      sinkId: otherSinkId,
      controlSchema: schema,
    });
    expect(other.prepared.map((item) => item.gid)).toEqual([`${otherSinkId}-0-1-1`]);
    expect(other.staging).toHaveLength(1);

    const table = await cli(
      "transactions",
      "list",
      "--url",
      url,
      "--sink-id",
      sinkId,
      "--control-schema",
      schema,
    );
    expect(table.code).toBe(0);
    expect(table.out).toMatch(new RegExp(`prepared\\s+${sinkId}-0-1-2\\s+0\\s+1\\s+2\\s.*\\sno\\n`));
    expect(table.out).toMatch(
      new RegExp(`staging\\s+${schema}\\.onceflow_stage_\\w+\\s+2\\s+1\\s.*\\syes\\n`),
    );
    expect(table.out).not.toContain(otherSinkId);
    const below = await cli(
      "transactions",
      "list",
      "--url",
      url,
      "--sink-id",
      sinkId,
      "--checkpoint-below",
      "2",
      "--json",
    );
    expect(JSON.parse(below.out).prepared.map((item: { gid: string }) => item.gid)).toEqual([
      `${sinkId}-1-1-1`,
    ]);
  });

  it("refuses an id that no sink registered, listing the ids that sinks did register", async () => {
    // A plausible hand-made id (the job and uid with a dot, without the suffix): never an all-clear.
    const wrong = `${sinkId}.out`;
    const listed = await cli(
      "transactions",
      "list",
      "--url",
      url,
      "--sink-id",
      wrong,
      "--control-schema",
      schema,
    );
    expect(listed.code).toBe(1);
    expect(listed.out).toBe("");
    expect(listed.err).toMatch(
      new RegExp(`^error \\[CONFIGURATION\\]: sinkId: no PostgresSink registered the sink id "${wrong}"`),
    );
    expect(listed.err).toContain(`are ${sinkId}, ${otherSinkId}`);
    const rollback = await cli(
      "transactions",
      "rollback",
      "--url",
      url,
      "--sink-id",
      wrong,
      "--all",
      "--job-stopped",
      "--control-schema",
      schema,
    );
    expect(rollback.code).toBe(1);
    expect(rollback.err).toContain(`no PostgresSink registered the sink id "${wrong}"`);
    await expect(
      listPostgresSinkTransactions({ connection: url, sinkId: wrong, controlSchema: schema }),
    ).rejects.toMatchObject({ code: "CONFIGURATION", reason: "UNKNOWN_SINK_ID", setting: "sinkId" });

    // Where the control tables are not (another schema), no id is registered at all.
    const elsewhere = await cli(
      "transactions",
      "list",
      "--url",
      url,
      "--sink-id",
      wrong,
      "--control-schema",
      "pg_catalog",
    );
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.err).toContain("no PostgresSink registered any id in");

    // The ids to use, as sinks registered them.
    const sinks = await cli("sinks", "list", "--url", url, "--control-schema", schema);
    expect(sinks.code).toBe(0);
    expect(sinks.out).toMatch(new RegExp(`^${sinkId}  3 subtask\\(s\\), epoch \\d+$`, "m"));
    expect(sinks.out).toMatch(new RegExp(`^${otherSinkId}  2 subtask\\(s\\), epoch \\d+$`, "m"));
    expect(
      (await listPostgresSinkIds({ connection: url, controlSchema: schema })).map((sink) => sink.sinkId),
    ).toEqual([sinkId, otherSinkId]);
    const help = await cli("transactions", "list", "--help");
    expect(help.out).toContain("onceflow-postgres sinks list");
    expect(help.out).toContain("events_to_pg.out_<6 hex digits>");
  });

  it("rolls back only superseded work by default, the rest with --job-stopped, and leaves other sinks alone", async () => {
    const before = await preparedGids(url, sinkId);
    // Without --job-stopped: the old gid and the zombie's staging tables; the pending ones are kept.
    const superseded = await cli(
      "transactions",
      "rollback",
      "--url",
      url,
      "--sink-id",
      sinkId,
      "--all",
      "--control-schema",
      schema,
    );
    expect(superseded.code).toBe(0);
    expect(superseded.out).toContain(`rolled back 1 prepared transaction(s): ${sinkId}-0-7`);
    expect(superseded.out).toMatch(/dropped [1-9] staging table\(s\)/);
    expect(superseded.out).toContain("kept 3");
    expect(await preparedGids(url, sinkId)).toEqual(before.filter((gid) => gid !== `${sinkId}-0-7`));
    expect(await stagingTables(sinkId)).toEqual([]);

    // A dry run changes nothing.
    const dry = await cli(
      "transactions",
      "rollback",
      "--url",
      url,
      "--sink-id",
      sinkId,
      "--checkpoint-below",
      "2",
      "--job-stopped",
      "--dry-run",
    );
    expect(dry.out).toContain(`would roll back 1 prepared transaction(s): ${sinkId}-1-1-1`);
    expect(await preparedGids(url, sinkId)).toEqual([
      `${sinkId}-0-1-2`,
      `${sinkId}-1-1-1`,
      `${sinkId}-1-1-9`,
    ]);

    // Below checkpoint 2, the job stopped: only subtask 1's checkpoint 1.
    const below = await rollbackPostgresSinkTransactions({
      connection: url,
      sinkId,
      controlSchema: schema,
      checkpointBelow: 2,
      jobStopped: true,
    });
    expect(below.rolledBack.map((item) => item.gid)).toEqual([`${sinkId}-1-1-1`]);
    expect(await preparedGids(url, sinkId)).toEqual([`${sinkId}-0-1-2`, `${sinkId}-1-1-9`]);

    // Everything, the job stopped: also the gid prepared in the other database, from there.
    const all = await cli(
      "transactions",
      "rollback",
      "--url",
      url,
      "--sink-id",
      sinkId,
      "--all",
      "--job-stopped",
    );
    expect(all.code).toBe(0);
    expect(all.out).toContain("rolled back 2 prepared transaction(s)");
    // A fresh connection sees none of the sink's work left, and the other sink's untouched.
    expect(await preparedGids(url, sinkId)).toEqual([]);
    expect(await stagingTables(sinkId)).toEqual([]);
    expect(await preparedGids(url, otherSinkId)).toEqual([`${otherSinkId}-0-1-1`]);
    expect(await stagingTables(otherSinkId)).toHaveLength(1);
    // Only committed rows are in the target: checkpoint 1 of subtask 0 and of the replacement.
    const rows = await sql<{ id: string }>(url, `SELECT id FROM ${schema}.${table} ORDER BY id`);
    expect(rows.map((row) => Number(row.id))).toEqual([1, 2, 30]);
    const again = await listPostgresSinkTransactions({ connection: url, sinkId, controlSchema: schema });
    expect(again).toEqual({ sinkId, prepared: [], staging: [] });
  });
});
