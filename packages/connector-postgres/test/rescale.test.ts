import { PostgresSink } from "@onceflow/connector-postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  noPreparedPostgresUrl,
  preparedGids,
  preparedPostgresUrl,
  sql,
  uniqueName,
} from "./helpers/postgres.js";
import { type DriverCheckpoint, SinkDriver } from "./helpers/sink-driver.js";

interface Event {
  id: number;
  payload: string;
}

const modes = [
  { mode: "prepared", url: preparedPostgresUrl() },
  // The machine's server: max_prepared_transactions = 0, which is what staging mode is for.
  { mode: "staging", url: noPreparedPostgresUrl() },
] as const;
// A schema of its own: the staging tables counted below are this file's only, whatever runs beside it.
const schema = uniqueName("rescale");
const table = "events";

beforeAll(async () => {
  for (const { url } of modes) {
    await sql(url, `CREATE SCHEMA ${schema}`);
    await sql(url, `CREATE TABLE ${schema}.${table} (id bigint NOT NULL, payload text)`);
  }
});

afterAll(async () => {
  for (const { url } of modes) await sql(url, `DROP SCHEMA IF EXISTS ${schema} CASCADE`);
});

/** What a union list state restores into every subtask: the elements of all old subtasks. */
function unionOf(checkpoints: DriverCheckpoint[]): DriverCheckpoint {
  const state = new Map<string, unknown[]>();
  for (const checkpoint of checkpoints) {
    for (const [name, elements] of checkpoint.state)
      state.set(name, [...(state.get(name) ?? []), ...elements]);
  }
  return { checkpointId: checkpoints[0]?.checkpointId ?? 0, state };
}

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, index) => from + index);

describe.each(modes)("PostgresSink rescaled from 3 subtasks to 2 ($mode mode)", ({ mode, url }) => {
  const sinkFor = (sinkId: string) =>
    new PostgresSink<Event>({
      connection: url,
      mode,
      sinkId,
      schema,
      table,
      columns: ["id", "payload"],
      toRow: (event) => [event.id, event.payload],
      batchSize: 2,
    });
  const tagged = (sinkId: string, ids: number[]) => ids.map((id) => ({ id, payload: `${sinkId}:${id}` }));
  const idsOf = async (sinkId: string) =>
    (
      await sql<{ id: string }>(url, `SELECT id FROM ${schema}.${table} WHERE payload LIKE $1 ORDER BY id`, [
        `${sinkId}:%`,
      ])
    ).map((row) => Number(row.id));
  const stagingTables = async () =>
    (
      await sql<{ name: string }>(
        url,
        `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE c.relkind = 'r' AND n.nspname = $1 AND c.relname LIKE 'onceflow_stage_%' ORDER BY 1`,
        [schema],
      )
    ).map((row) => row.name);

  it("commits each old subtask's checkpoint once and leaves nothing of the removed subtask prepared or staged", async () => {
    const sinkId = uniqueName("r");
    const checkpoints: DriverCheckpoint[] = [];
    for (const subtaskIndex of [0, 1, 2]) {
      const old = new SinkDriver(sinkFor(sinkId), { subtaskIndex, parallelism: 3 });
      await old.start();
      const base = subtaskIndex * 100;
      await old.write(...tagged(sinkId, range(base, base + 5)));
      checkpoints.push(await old.snapshot(1));
      await old.write(...tagged(sinkId, range(base + 5, base + 8)));
      await old.snapshot(2); // never completes: prepared or staged, and in no checkpoint we restore
      await old.write(...tagged(sinkId, range(base + 8, base + 10))); // open
      await old.close(); // the crash: checkpoints 1 and 2 stay prepared or staged
    }
    if (mode === "prepared") expect(await preparedGids(url, sinkId)).toHaveLength(6);
    else expect(await stagingTables()).toHaveLength(6);

    // Both new subtasks recover at once, as in a job; old subtask 2 belongs to new subtask 0.
    const rescaled = [0, 1].map(
      (subtaskIndex) => new SinkDriver(sinkFor(sinkId), { subtaskIndex, parallelism: 2 }),
    );
    await Promise.all(rescaled.map((driver) => driver.start(unionOf(checkpoints))));
    expect(await idsOf(sinkId)).toEqual([...range(0, 5), ...range(100, 105), ...range(200, 205)]);
    expect(await preparedGids(url, sinkId)).toEqual([]);
    expect(await stagingTables()).toEqual([]);

    for (const [subtaskIndex, driver] of rescaled.entries()) {
      await driver.write(...tagged(sinkId, range(1000 + subtaskIndex * 10, 1000 + subtaskIndex * 10 + 3)));
      await driver.snapshot(2);
      await driver.complete(2);
      await driver.close();
    }
    expect(await idsOf(sinkId)).toEqual([
      ...range(0, 5),
      ...range(100, 105),
      ...range(200, 205),
      ...range(1000, 1003),
      ...range(1010, 1013),
    ]);
    expect(await preparedGids(url, sinkId)).toEqual([]);
  });
});
