import { PostgresCheckpointStorage } from "@onceflow/connector-postgres";
import { CheckpointError } from "@onceflow/core";
import { createTestCheckpoint, describeCheckpointStorageContract } from "@onceflow/testkit/vitest";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { noPreparedPostgresUrl, sql, uniqueName } from "./helpers/postgres.js";

// Checkpoint storage needs no prepared transactions: the machine's plain server is enough.
const url = noPreparedPostgresUrl();
const created: string[] = [];

function newStorage(table = uniqueName("ckpt")): PostgresCheckpointStorage {
  created.push(table);
  return new PostgresCheckpointStorage({ connection: url, table });
}

afterAll(async () => {
  for (const table of created) await sql(url, `DROP TABLE IF EXISTS ${table}_state, ${table}`);
});

describeCheckpointStorageContract("PostgresCheckpointStorage", async () => newStorage(), {
  corrupt: async (storage, at) => {
    const table = storage.description.split(".").at(-1)!;
    await sql(
      url,
      `UPDATE ${table}_state SET state = state || '\\x00'::bytea WHERE job_id = $1 AND scope = $2 AND checkpoint_id = $3 AND subtask = $4`,
      [at.jobId, at.scope, at.checkpointId, at.subtaskIndex],
    );
  },
});

describe("PostgresCheckpointStorage", () => {
  it("never shows a partly written checkpoint: a store cut off mid-transaction leaves nothing", async () => {
    const table = uniqueName("ckpt");
    const storage = newStorage(table);
    await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 1 }));
    // Write the metadata row of checkpoint 2 by hand, then kill the session before it commits,
    // as a crash in the middle of store() would.
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    client.on("error", () => undefined);
    const pid = (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
    await client.query("BEGIN");
    await client.query(
      `INSERT INTO ${table} (job_id, scope, checkpoint_id, metadata) VALUES ('orders', 'all', 2, $1::jsonb)`,
      [JSON.stringify(createTestCheckpoint({ jobId: "orders", checkpointId: 2 }).metadata)],
    );
    await sql(url, "SELECT pg_terminate_backend($1)", [pid]);
    await client.end().catch(() => undefined);
    expect((await storage.list("orders")).map((m) => m.checkpointId)).toEqual([1]);
    await storage.close();
  });

  it("a checkpoint whose state rows are missing is corrupt, not restored", async () => {
    const table = uniqueName("ckpt");
    const storage = newStorage(table);
    await storage.store(createTestCheckpoint({ jobId: "orders", checkpointId: 3, states: ["a", "b"] }));
    await sql(url, `DELETE FROM ${table}_state WHERE subtask = 1`);
    const error = await storage.load("orders", "all", 3).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(CheckpointError);
    expect((error as CheckpointError).code).toBe("CHECKPOINT_CORRUPT");
    expect((error as Error).message).toContain("the state of subtask 1 is missing");
    await storage.close();
  });

  it("describes itself with its table", async () => {
    const storage = newStorage("ckpt_description_probe");
    expect(storage.description).toMatch(/^postgres:127\.0\.0\.1:5432\/test\/public\.ckpt_description_probe$/);
    await storage.close();
  });
});
