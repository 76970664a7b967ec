import { PostgresSink, type PostgresSinkOptions } from "@onceflow/connector-postgres";
import { TransactionError } from "@onceflow/core";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ControlTables } from "../src/sink/control-tables.js";
import { preparedGids, preparedPostgresUrl, sql, uniqueName } from "./helpers/postgres.js";
import { SinkDriver } from "./helpers/sink-driver.js";

/**
 * Prepared mode against older attempts of the same sink: the epoch in every gid, and the epoch
 * fence around PREPARE TRANSACTION and COMMIT PREPARED: a zombie attempt is fenced off whole, not only
 * at some of its steps.
 */

interface Event {
  id: number;
  payload: string;
}

const url = preparedPostgresUrl();
const table = uniqueName("fence");

beforeAll(async () => {
  await sql(url, `CREATE TABLE ${table} (id bigint NOT NULL, payload text)`);
});

afterAll(async () => {
  await sql(url, `DROP TABLE IF EXISTS ${table}`);
});

function sinkFor(sinkId: string, extra: Partial<PostgresSinkOptions<Event>> = {}): PostgresSink<Event> {
  return new PostgresSink<Event>({
    connection: url,
    mode: "prepared",
    sinkId,
    table,
    columns: ["id", "payload"],
    toRow: (event) => [event.id, event.payload],
    batchSize: 3,
    commitRetry: { maxAttempts: 1 },
    ...extra,
  } as PostgresSinkOptions<Event>);
}

const rows = (sinkId: string, who: string, from: number, to: number): Event[] =>
  Array.from({ length: to - from }, (_, index) => ({ id: from + index, payload: `${sinkId}:${who}` }));

async function committed(sinkId: string): Promise<string[]> {
  const found = await sql<{ id: string; payload: string }>(
    url,
    `SELECT id, payload FROM ${table} WHERE payload LIKE $1 ORDER BY id, payload`,
    [`${sinkId}:%`],
  );
  return found.map((row) => `${row.id}${row.payload.slice(sinkId.length)}`);
}

const failureOf = (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );

describe("PostgresSink prepared mode: attempts are told apart by their epoch", () => {
  it("names gids <sinkId>-<subtask>-<epoch>-<checkpoint>: each start of the sink gets a new epoch", async () => {
    const sinkId = uniqueName("g");
    const sink = sinkFor(sinkId);
    const driver = new SinkDriver(sink);
    await driver.start();
    await driver.write(...rows(sinkId, "a", 0, 2));
    await driver.snapshot(4);
    expect(await preparedGids(url, sinkId)).toEqual([`${sinkId}-0-1-4`]);
    await driver.complete(4);
    await driver.close();
    // The same instance again (an in-process restart): a new epoch.
    await driver.start();
    await driver.write(...rows(sinkId, "b", 2, 3));
    await driver.snapshot(5);
    expect(await preparedGids(url, sinkId)).toEqual([`${sinkId}-0-2-5`]);
    await driver.complete(5);
    await driver.close();
    expect(await committed(sinkId)).toEqual(["0:a", "1:a", "2:b"]);
  });

  it("a stale handle of an earlier attempt never commits the later attempt's transaction of the same checkpoint", async () => {
    const sinkId = uniqueName("g");
    // Attempt A: checkpoint 1 completes; checkpoint 2 is prepared but A dies before it completes.
    const a = new SinkDriver(sinkFor(sinkId));
    await a.start();
    await a.write(...rows(sinkId, "a", 0, 3));
    const checkpoint1 = await a.snapshot(1);
    await a.complete(1);
    await a.write(...rows(sinkId, "a", 3, 6));
    const staleCheckpoint2 = await a.snapshot(2); // e.g. a checkpoint whose store timed out, landing late
    await a.close();
    // Attempt B restores 1 and prepares its own checkpoint 2 (more records this time), then dies.
    const b = new SinkDriver(sinkFor(sinkId));
    await b.start(checkpoint1);
    await b.write(...rows(sinkId, "b", 3, 8));
    await b.snapshot(2);
    await b.close();
    const gidOfB = `${sinkId}-0-2-2`;
    expect(await preparedGids(url, sinkId)).toEqual([gidOfB]);
    // Attempt C restores the stale checkpoint 2 of A: A's gid is gone; it must not reach B's.
    const c = new SinkDriver(sinkFor(sinkId));
    const error = await failureOf(c.start(staleCheckpoint2));
    await c.close();
    expect(error).toBeInstanceOf(TransactionError);
    expect((error as Error).message).toContain(`'${sinkId}-0-1-2'`);
    expect(await committed(sinkId)).toEqual(["0:a", "1:a", "2:a"]);
    expect(await preparedGids(url, sinkId)).toEqual([gidOfB]);
    await sql(url, `ROLLBACK PREPARED '${gidOfB}'`);
  });

  it("a zombie's COMMIT PREPARED is refused once a newer attempt bumped the epoch", async () => {
    const sinkId = uniqueName("g");
    const zombie = new SinkDriver(sinkFor(sinkId));
    await zombie.start();
    await zombie.write(...rows(sinkId, "z", 0, 3));
    await zombie.snapshot(1);
    // A newer attempt of the sink starts (its epoch bump) before the zombie's checkpoint completes.
    await sql(url, "UPDATE onceflow_sink_epochs SET epoch = epoch + 1 WHERE sink_id = $1", [sinkId]);
    const error = await failureOf(zombie.complete(1));
    expect(error).toBeInstanceOf(TransactionError);
    expect((error as TransactionError).code).toBe("TRANSACTION_FENCED");
    expect(await committed(sinkId)).toEqual([]);
    expect(await preparedGids(url, sinkId)).toEqual([`${sinkId}-0-1-1`]);
    await zombie.close();
    await sql(url, `ROLLBACK PREPARED '${sinkId}-0-1-1'`);
  });

  it("a newer attempt's epoch bump waits for a zombie's PREPARE in flight, so its leftover rollback finds it", async () => {
    const sinkId = uniqueName("g");
    const zombie = new SinkDriver(sinkFor(sinkId));
    await zombie.start();
    await zombie.write(...rows(sinkId, "z", 0, 3));
    // Hold the zombie's PREPARE inside the fence: its marker insert waits for this session's row.
    const blocker = new pg.Client({ connectionString: url });
    const newer = new pg.Client({ connectionString: url });
    await blocker.connect();
    await newer.connect();
    try {
      await blocker.query("BEGIN");
      await blocker.query(
        "INSERT INTO onceflow_sink_markers (sink_id, subtask, checkpoint_id, epoch, row_count) VALUES ($1, 0, 1, 0, 0)",
        [sinkId],
      );
      const preparing = failureOf(zombie.snapshot(1));
      await new Promise((resolve) => setTimeout(resolve, 300));
      // What a newer process of the sink does first at its start.
      const control = new ControlTables("public", "onceflow_sink_markers", "onceflow_sink_epochs");
      const bumping = control
        .bumpEpoch(newer, sinkId, 0, 10_000, {
          jobId: "test-job",
          incarnation: 2,
          series: undefined,
          newestIncarnation: undefined,
        })
        .then(async () => preparedGids(url, sinkId));
      await new Promise((resolve) => setTimeout(resolve, 300));
      await blocker.query("ROLLBACK");
      // When the bump returns, the zombie's PREPARE has ended: the newer process's leftover scan sees it.
      expect(await bumping).toEqual([`${sinkId}-0-1-1`]);
      expect(await preparing).toBeUndefined();
      const error = await failureOf(zombie.complete(1));
      expect((error as TransactionError).code).toBe("TRANSACTION_FENCED");
      await zombie.close();
      expect(await committed(sinkId)).toEqual([]);
      await sql(url, `ROLLBACK PREPARED '${sinkId}-0-1-1'`);
    } finally {
      await blocker.end();
      await newer.end();
    }
  });
});
