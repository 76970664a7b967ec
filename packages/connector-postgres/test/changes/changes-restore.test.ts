import { describe, expect, it } from "vitest";
import { type PostgresChange, PostgresReplicationConnectionError } from "../../src/index.js";
import { openReader, readRecords, sql, useLogicalPostgres } from "./changes-harness.js";

/** Applies change records to a map keyed by id: what a downstream upsert table would hold. */
function materialize(records: PostgresChange[], into = new Map<number, unknown>()): Map<number, unknown> {
  for (const record of records) {
    if (record.kind === "delete") into.delete(record.before?.id as number);
    else if (record.kind === "truncate") into.clear();
    else {
      if (record.kind === "update" && record.before !== null) into.delete(record.before.id as number);
      into.set(record.after?.id as number, record.after?.v);
    }
  }
  return into;
}

async function tableState(url: string, table: string): Promise<Map<number, unknown>> {
  const rows = await sql<{ id: number; v: number }>(url, `select id, v from ${table} order by id`);
  return new Map(rows.map((row) => [row.id, row.v]));
}

describe("PostgresChangesSource restored from a checkpoint", () => {
  const postgres = useLogicalPostgres();

  it("replays a transaction cut by the checkpoint from its next change, and nothing before it", async () => {
    const url = postgres().connectionString;
    await sql(url, "create table big (id int primary key, v int)");
    const options = {
      connection: url,
      tables: ["big"],
      initialSnapshot: false,
      maxBatchSize: 100,
      slotName: "big_slot",
    };
    const first = await openReader(options, "big");
    await sql(url, "insert into big select g, g from generate_series(1, 30) g");
    await sql(url, "insert into big select g, g from generate_series(31, 280) g");
    let handedOut: PostgresChange[] = [];
    let state: ReturnType<typeof first.reader.snapshotState> = [];
    try {
      handedOut = await readRecords(first.reader, 130);
      // The checkpoint falls inside the second transaction and is never confirmed to the server:
      // the slot replays both transactions.
      expect(handedOut.length).toBeGreaterThan(30);
      expect(handedOut.length).toBeLessThan(280);
      state = first.reader.snapshotState(1);
      expect(state[0]?.partial).toMatchObject({ changes: handedOut.length - 30 });
    } finally {
      await first.reader.close();
    }
    await sql(url, "update big set v = -v where id <= 2");

    const second = await openReader(options, "big", state);
    try {
      const remaining = 280 - handedOut.length;
      const rest = await readRecords(second.reader, remaining + 2);
      const ids = [...handedOut, ...rest].map((r) => `${r.kind}:${r.after?.id}`);
      expect(ids).toHaveLength(282);
      expect(new Set(ids).size).toBe(282);
      expect(rest.slice(0, remaining).map((r) => r.after?.id)).toEqual(
        Array.from({ length: remaining }, (_, i) => handedOut.length + 1 + i),
      );
      expect(rest.slice(remaining).map((r) => [r.kind, r.after?.id, r.after?.v])).toEqual([
        ["update", 1, -1],
        ["update", 2, -2],
      ]);
      expect(await readRecords(second.reader, 1, 20)).toEqual([]);
    } finally {
      await second.reader.close();
    }
  });

  it("finishes an initial snapshot interrupted by a restore: the rows and the changes meanwhile, each once", async () => {
    const url = postgres().connectionString;
    await sql(url, "create table stock (id int primary key, v int)");
    await sql(url, "insert into stock select g, g from generate_series(1, 300) g");
    const options = { connection: url, tables: ["stock"], snapshotPageSize: 50, slotName: "stock_slot" };
    const first = await openReader(options, "stock");
    const firstReads = await readRecords(first.reader, 100);
    expect(firstReads.map((r) => r.after?.id)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    const state = first.reader.snapshotState(1);
    expect(state[0]?.snapshot?.tables[0]).toMatchObject({ done: false, lastKey: ["100"] });
    await first.reader.close();

    // While the job is down: changes of rows read and not yet read.
    await sql(url, "update stock set v = -10 where id = 10");
    await sql(url, "update stock set v = -200 where id = 200");
    await sql(url, "delete from stock where id = 250");
    await sql(url, "insert into stock values (301, 301)");
    await sql(url, "update stock set id = 400 where id = 50");

    const second = await openReader(options, "stock", state);
    try {
      const rest = await readRecords(second.reader, 1000, 30);
      const reads = rest.filter((r) => r.kind === "read");
      // The resumed read sees the table as it is now, from the key after the last one read.
      expect(reads.map((r) => r.after?.id)).toEqual([
        ...Array.from({ length: 149 }, (_, i) => 101 + i),
        ...Array.from({ length: 50 }, (_, i) => 251 + i),
        301,
        400,
      ]);
      // Of the changes meanwhile, only those of rows read before the interruption are streamed.
      expect(rest.filter((r) => r.kind !== "read").map((r) => [r.kind, r.before?.id, r.after?.id])).toEqual([
        ["update", undefined, 10],
      ]);
      await sql(url, "update stock set v = 0 where id in (150, 260)");
      const later = await readRecords(second.reader, 2);
      expect(later.map((r) => [r.kind, r.after?.id, r.after?.v])).toEqual([
        ["update", 150, 0],
        ["update", 260, 0],
      ]);
      const materialized = materialize([...firstReads, ...rest, ...later]);
      // Row 50 moved to key 400 across the resume point: the known limit (its old key stays).
      materialized.delete(50);
      expect(materialized).toEqual(await tableState(url, "stock"));
    } finally {
      await second.reader.close();
    }
  });

  it("fails with SERVICE_UNAVAILABLE when the server restarts, and reads on from the checkpoint after it", async () => {
    const server = postgres();
    const url = server.connectionString;
    await sql(url, "create table survivor (id int primary key, v int)");
    const options = {
      connection: url,
      tables: ["survivor"],
      initialSnapshot: false,
      slotName: "survivor_slot",
    };
    const first = await openReader(options, "survivor");
    let state: ReturnType<typeof first.reader.snapshotState> = [];
    try {
      await sql(url, "insert into survivor select g, g from generate_series(1, 5) g");
      expect(await readRecords(first.reader, 5)).toHaveLength(5);
      state = first.reader.snapshotState(1);
      await first.reader.notifyCheckpointComplete?.(1);
      await sql(url, "insert into survivor values (6, 6)");
      await server.restart({ immediate: true });
      await sql(url, "insert into survivor values (7, 7)");
      let failure: unknown;
      for (let i = 0; i < 200 && failure === undefined; i++) {
        await Promise.race([first.reader.isAvailable(), new Promise((resolve) => setTimeout(resolve, 50))]);
        failure = await Promise.resolve(first.reader.pollNext()).then(
          () => undefined,
          (error: unknown) => error,
        );
      }
      expect(failure).toBeInstanceOf(PostgresReplicationConnectionError);
      expect(failure).toMatchObject({ code: "SERVICE_UNAVAILABLE" });
    } finally {
      await first.reader.close();
    }
    const second = await openReader(options, "survivor", state);
    try {
      const rest = await readRecords(second.reader, 2);
      expect(rest.map((r) => r.after?.id)).toEqual([6, 7]);
      expect(await readRecords(second.reader, 1, 20)).toEqual([]);
    } finally {
      await second.reader.close();
    }
  });

  it("fails with SERVICE_UNAVAILABLE while an older reader (a zombie) still holds the slot", async () => {
    const url = postgres().connectionString;
    await sql(url, "create table held (id int primary key)");
    const options = { connection: url, tables: ["held"], initialSnapshot: false, slotName: "held_slot" };
    const zombie = await openReader(options, "held");
    try {
      const state = zombie.reader.snapshotState(1);
      const fresh = await openReader(options, "held").then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(fresh).toBeInstanceOf(PostgresReplicationConnectionError);
      const restored = await openReader(options, "held", state);
      try {
        let failure: unknown;
        for (let i = 0; i < 200 && failure === undefined; i++) {
          await Promise.race([
            restored.reader.isAvailable(),
            new Promise((resolve) => setTimeout(resolve, 50)),
          ]);
          failure = await Promise.resolve(restored.reader.pollNext()).then(
            () => undefined,
            (error: unknown) => error,
          );
        }
        expect(failure).toMatchObject({ code: "SERVICE_UNAVAILABLE" });
        expect(String((failure as Error).message)).toMatch(/active/);
      } finally {
        await restored.reader.close();
      }
    } finally {
      await zombie.reader.close();
    }
  });
});
