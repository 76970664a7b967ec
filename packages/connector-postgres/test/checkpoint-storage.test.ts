import { PostgresCheckpointStorage } from "@onceflow/connector-postgres";
import { CheckpointError, type CompletedCheckpoint, createCompletedCheckpoint } from "@onceflow/core";
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
  for (const table of created)
    await sql(url, `DROP TABLE IF EXISTS ${table}_state, ${table}_owner, ${table}_log, ${table}`);
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
  it("starts a new incarnation series when the job's rows are deleted (a reset)", async () => {
    const table = uniqueName("ckpt");
    const storage = newStorage(table);
    try {
      await storage.claimIncarnation("orders", "all");
      const before = await storage.describeIncarnations("orders");
      expect(before.newest).toBe(1);
      // The series row is not a scope.
      expect(await storage.claimedScopes("orders")).toEqual(["all"]);
      await sql(url, `DELETE FROM ${table}_owner WHERE job_id = 'orders'`);
      expect(await storage.claimIncarnation("orders", "all")).toBe(1);
      const after = await storage.describeIncarnations("orders");
      expect(after).toEqual({ series: expect.any(String), newest: 1 });
      expect(after.series).not.toBe(before.series);
    } finally {
      await storage.close();
    }
  });

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

/** A one-subtask checkpoint written by `incarnation`. */
function checkpointOf(
  jobId: string,
  scope: string,
  checkpointId: number,
  incarnation: number,
): CompletedCheckpoint {
  return createCompletedCheckpoint({
    jobId,
    checkpointId,
    scope,
    parallelism: 1,
    subtaskStates: new Map([[0, Buffer.from(`state ${checkpointId}`)]]),
    triggeredAt: 1_700_000_000_000,
    isFinal: false,
    summary: {},
    incarnation,
  });
}

const codeOf = (promise: Promise<unknown>): Promise<string | undefined> =>
  promise.then(
    () => undefined,
    (caught: unknown) => (caught as CheckpointError).code ?? String(caught),
  );

describe("PostgresCheckpointStorage.claimIncarnation", () => {
  it("hands out numbers that grow job-wide, across scopes, and start again for another job", async () => {
    const storage = newStorage();
    try {
      const a = await storage.claimIncarnation("orders", "subtask-0-of-2");
      const b = await storage.claimIncarnation("orders", "subtask-1-of-2");
      const c = await storage.claimIncarnation("orders", "subtask-0-of-2", { after: a });
      expect([a, b, c]).toEqual([1, 2, 3]);
      expect(await storage.claimIncarnation("payments", "all")).toBe(1);
    } finally {
      await storage.close();
    }
  });

  it("fences the older incarnations of the scope: their stores fail SUPERSEDED; other scopes are not touched", async () => {
    const storage = newStorage();
    try {
      const old = await storage.claimIncarnation("orders", "all");
      await storage.store(checkpointOf("orders", "all", 1, old));
      const other = await storage.claimIncarnation("orders", "base");
      const newer = await storage.claimIncarnation("orders", "all");
      expect(await codeOf(storage.store(checkpointOf("orders", "all", 2, old)))).toBe("SUPERSEDED");
      expect(await codeOf(storage.store(checkpointOf("orders", "all", 2, newer)))).toBeUndefined();
      expect(await codeOf(storage.store(checkpointOf("orders", "base", 2, other)))).toBeUndefined();
      expect((await storage.list("orders")).map((m) => `${m.scope}#${m.checkpointId}`)).toEqual([
        "all#1",
        "all#2",
        "base#2",
      ]);
    } finally {
      await storage.close();
    }
  });

  it("with `after`: claims only while `after` is still the newest of the scope", async () => {
    const storage = newStorage();
    try {
      expect(await codeOf(storage.claimIncarnation("orders", "all", { after: 1 }))).toBe("SUPERSEDED");
      const first = await storage.claimIncarnation("orders", "all");
      const taker = await storage.claimIncarnation("orders", "all"); // another process took over
      // The first one's in-process restart must stop, not fence the taker in turn.
      const error = await storage.claimIncarnation("orders", "all", { after: first }).then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(error).toBeInstanceOf(CheckpointError);
      expect((error as CheckpointError).code).toBe("SUPERSEDED");
      expect((error as Error).message).toContain(`incarnation ${taker}`);
      expect(await storage.claimIncarnation("orders", "all", { after: taker })).toBeGreaterThan(taker);
    } finally {
      await storage.close();
    }
  });

  it("of concurrent claims `after` the same incarnation exactly one wins; plain claims all get distinct numbers", async () => {
    const storage = newStorage();
    const others = Array.from(
      { length: 4 },
      () => new PostgresCheckpointStorage({ connection: url, table: created.at(-1)! }),
    );
    try {
      const first = await storage.claimIncarnation("orders", "all");
      const outcomes = await Promise.all(
        others.map((each) =>
          each.claimIncarnation("orders", "all", { after: first }).then(
            (number) => ({ number }),
            (caught: unknown) => ({ code: (caught as CheckpointError).code }),
          ),
        ),
      );
      expect(outcomes.filter((each) => "number" in each)).toHaveLength(1);
      expect(outcomes.filter((each) => "code" in each && each.code === "SUPERSEDED")).toHaveLength(3);
      const plain = await Promise.all(
        others.map((each) => each.claimIncarnation("orders", `scope-${others.indexOf(each)}`)),
      );
      expect(new Set(plain).size).toBe(plain.length);
    } finally {
      await Promise.all(others.map((each) => each.close()));
      await storage.close();
    }
  });

  it("a store racing a claim either lands before the claim returns or fails SUPERSEDED", async () => {
    const table = uniqueName("ckpt");
    const storage = newStorage(table);
    const claimer = new PostgresCheckpointStorage({ connection: url, table });
    const blocker = new pg.Client({ connectionString: url });
    await blocker.connect();
    try {
      const old = await storage.claimIncarnation("orders", "all");
      await storage.store(checkpointOf("orders", "all", 1, old));
      // 1. The store is in flight (held inside its transaction) when the claim starts: the claim waits for it.
      await blocker.query("BEGIN");
      await blocker.query(`LOCK TABLE ${table}_state IN ACCESS EXCLUSIVE MODE`);
      const storing = codeOf(storage.store(checkpointOf("orders", "all", 2, old)));
      await new Promise((resolve) => setTimeout(resolve, 300));
      let claimReturned = false;
      const claiming = claimer.claimIncarnation("orders", "all").then((number) => {
        claimReturned = true;
        return number;
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(claimReturned).toBe(false);
      await blocker.query("COMMIT");
      expect(await storing).toBeUndefined();
      const newer = await claiming;
      expect((await storage.list("orders")).map((m) => m.checkpointId)).toEqual([1, 2]);
      // 2. The claim is in flight when the store starts: the store waits for it, then fails.
      await blocker.query("BEGIN");
      await blocker.query(`LOCK TABLE ${table}_owner IN ACCESS EXCLUSIVE MODE`);
      const claimingAgain = claimer.claimIncarnation("orders", "all", { after: newer });
      await new Promise((resolve) => setTimeout(resolve, 300));
      const lateStore = codeOf(storage.store(checkpointOf("orders", "all", 3, newer)));
      await new Promise((resolve) => setTimeout(resolve, 300));
      await blocker.query("COMMIT");
      expect(await claimingAgain).toBeGreaterThan(newer);
      expect(await lateStore).toBe("SUPERSEDED");
      expect((await storage.list("orders")).map((m) => m.checkpointId)).toEqual([1, 2]);
    } finally {
      await blocker.end();
      await claimer.close();
      await storage.close();
    }
  });
});
