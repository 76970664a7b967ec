import { createMemoryLogger } from "@onceflow/core";
import { describe, expect, it } from "vitest";
import { PostgresChangesSource, PostgresConfigurationError } from "../../src/index.js";
import { openReader, readRecords, sql, useLogicalPostgres } from "./changes-harness.js";

describe("PostgresChangesSource over a logical-replication server", () => {
  const postgres = useLogicalPostgres();

  it("decodes numeric, bigint, timestamptz, json, jsonb, arrays, bytea and uuid exactly", async () => {
    const url = postgres().connectionString;
    await sql(
      url,
      `create table typed (id int primary key, amount numeric(30,10), big bigint, at timestamptz, plain timestamp,
         doc json, docb jsonb, ints int[], texts text[], blob bytea, uid uuid, flag boolean, ratio float8, day date)`,
    );
    const { reader } = await openReader(
      { connection: url, tables: ["public.typed"], initialSnapshot: false },
      "types",
    );
    try {
      await sql(
        url,
        `insert into typed values (1, 12345678901234567890.0123456789, 9007199254740993,
           '2024-02-29 23:59:59.123456+02', '2024-01-01 00:00:00.000001', '{"a": [1, 2]}', '{"b": {"c": null}}',
           '{1,NULL,3}', '{"x,y","q\\"z",NULL}', '\\x00ff10', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', true, 'NaN', '2024-03-01')`,
      );
      const [change] = await readRecords(reader, 1);
      expect(change?.kind).toBe("insert");
      expect(change?.after).toEqual({
        id: 1,
        amount: "12345678901234567890.0123456789",
        big: 9007199254740993n,
        at: "2024-02-29T21:59:59.123456Z",
        plain: "2024-01-01T00:00:00.000001",
        doc: { a: [1, 2] },
        docb: { b: { c: null } },
        ints: [1, null, 3],
        texts: ["x,y", 'q"z', null],
        blob: Buffer.from([0x00, 0xff, 0x10]),
        uid: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        flag: true,
        ratio: Number.NaN,
        day: "2024-03-01",
      });
      expect(change?.xid).toBeGreaterThan(0);
      expect(change?.commitTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
      expect(change?.commitLsn).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);
    } finally {
      await reader.close();
    }
  });

  it("gives before images as REPLICA IDENTITY allows, marks unchanged TOAST columns, and emits truncates", async () => {
    const url = postgres().connectionString;
    await sql(url, "create table docs (id int primary key, title text, body text)");
    await sql(url, "create table audit (id int primary key, note text)");
    await sql(url, "alter table audit replica identity full");
    // A body too large and random to compress stays out of line (TOASTed).
    await sql(
      url,
      "insert into docs select 1, 'first', string_agg(md5(random()::text), '') from generate_series(1, 400)",
    );
    await sql(url, "insert into audit values (1, 'old')");
    const { reader } = await openReader(
      { connection: url, tables: ["public.docs", "public.audit"], initialSnapshot: false },
      "images",
    );
    try {
      await sql(url, "update docs set title = 'renamed' where id = 1");
      await sql(url, "update docs set id = 2 where id = 1");
      await sql(url, "update audit set note = 'new' where id = 1");
      await sql(url, "delete from audit where id = 1");
      await sql(url, "delete from docs where id = 2");
      await sql(url, "insert into audit values (5, 'x')");
      await sql(url, "truncate audit");
      const changes = await readRecords(reader, 7);
      const [titleUpdate, keyUpdate, auditUpdate, auditDelete, docsDelete, , truncate] = changes;
      expect(titleUpdate).toMatchObject({
        kind: "update",
        beforeImage: "none",
        before: null,
        after: { id: 1, title: "renamed" },
      });
      expect(titleUpdate?.unchangedToastColumns).toEqual(["body"]);
      expect(titleUpdate?.after).not.toHaveProperty("body");
      expect(keyUpdate).toMatchObject({
        kind: "update",
        beforeImage: "key",
        before: { id: 1 },
        after: { id: 2 },
      });
      expect(auditUpdate).toMatchObject({
        beforeImage: "full",
        before: { id: 1, note: "old" },
        after: { id: 1, note: "new" },
      });
      expect(auditDelete).toMatchObject({
        kind: "delete",
        beforeImage: "full",
        before: { id: 1, note: "new" },
        after: null,
      });
      expect(docsDelete).toMatchObject({ kind: "delete", beforeImage: "key", before: { id: 2 } });
      expect(docsDelete?.before).not.toHaveProperty("title");
      expect(truncate).toMatchObject({
        kind: "truncate",
        schema: "public",
        table: "audit",
        truncate: { cascade: false },
      });
    } finally {
      await reader.close();
    }
  });

  it("reads the initial snapshot, then every change after it: no gap and no overlap", async () => {
    const url = postgres().connectionString;
    await sql(url, "create table items (id int primary key, v int)");
    await sql(url, "insert into items select g, g from generate_series(1, 250) g");
    const { reader } = await openReader(
      { connection: url, tables: ["items"], snapshotPageSize: 40 },
      "snapshot-then-stream",
    );
    try {
      await sql(url, "update items set v = -1 where id = 7");
      await sql(url, "insert into items values (251, 251)");
      const records = await readRecords(reader, 252);
      const reads = records.filter((r) => r.kind === "read");
      expect(reads.map((r) => r.after?.id)).toEqual(Array.from({ length: 250 }, (_, i) => i + 1));
      // The update came after the slot's snapshot: the read shows the old value, the stream the change.
      expect(reads[6]?.after).toEqual({ id: 7, v: 7 });
      expect(records.slice(250).map((r) => [r.kind, r.after?.id, r.after?.v])).toEqual([
        ["update", 7, -1],
        ["insert", 251, 251],
      ]);
      expect(await readRecords(reader, 1, 20)).toEqual([]);
    } finally {
      await reader.close();
    }
  });

  it("applies a relation message's new columns to the changes after an ALTER TABLE", async () => {
    const url = postgres().connectionString;
    await sql(url, "create table evolving (id int primary key, a text)");
    const { reader, logger } = await openReader(
      { connection: url, tables: ["evolving"], initialSnapshot: false },
      "schema-change",
    );
    try {
      await sql(url, "insert into evolving values (1, 'one')");
      await sql(url, "alter table evolving add column b bigint, drop column a");
      await sql(url, "insert into evolving values (2, 22)");
      const [before, after] = await readRecords(reader, 2);
      expect(before?.after).toEqual({ id: 1, a: "one" });
      expect(after?.after).toEqual({ id: 2, b: 22n });
      expect(
        logger.entries.some((entry) => entry.level === "warn" && /changed its shape/.test(entry.message)),
      ).toBe(true);
    } finally {
      await reader.close();
    }
  });

  it("advances the slot's confirmed_flush_lsn only when a checkpoint completes", async () => {
    const url = postgres().connectionString;
    await sql(url, "create table acked (id int primary key)");
    const { reader, metrics } = await openReader(
      {
        connection: url,
        tables: ["acked"],
        initialSnapshot: false,
        slotName: "acked_slot",
        statusIntervalMs: 50,
      },
      "acked",
    );
    try {
      const confirmed = async () =>
        (
          await sql<{ lsn: string }>(
            url,
            "select confirmed_flush_lsn::text as lsn from pg_replication_slots where slot_name = 'acked_slot'",
          )
        )[0]?.lsn;
      const start = await confirmed();
      await sql(url, "insert into acked select generate_series(1, 10)");
      expect(await readRecords(reader, 10)).toHaveLength(10);
      const [state] = reader.snapshotState(1);
      // Status updates keep going out, but never beyond a completed checkpoint.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await confirmed()).toBe(start);
      await reader.notifyCheckpointComplete?.(1);
      let now = await confirmed();
      for (let i = 0; i < 100 && now !== state?.flushLsn; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        now = await confirmed();
      }
      expect(now).toBe(state?.flushLsn);
      expect(metrics.read("onceflow_postgres_replication_slot_retained_wal_bytes")).toBeGreaterThan(0);
    } finally {
      await reader.close();
    }
  });

  it("fails with REPLICATION_SLOT_LOST when a restored split's slot was dropped", async () => {
    const url = postgres().connectionString;
    await sql(url, "create table lost (id int primary key)");
    const options = { connection: url, tables: ["lost"], initialSnapshot: false, slotName: "lost_slot" };
    const first = await openReader(options, "lost");
    const state = first.reader.snapshotState(1);
    await first.reader.close();
    await sql(url, "select pg_drop_replication_slot('lost_slot')");
    const failure = await openReader(options, "lost", state).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(PostgresConfigurationError);
    expect(failure).toMatchObject({ code: "CONFIGURATION", reason: "REPLICATION_SLOT_LOST" });
  });

  it("says so when the server cannot do logical replication", async () => {
    const url = postgres().connectionString;
    await sql(url, "create role plain login");
    const plainUrl = url.replace("postgres@", "plain@");
    const failure = await openReader({ connection: plainUrl, tables: ["lost"] }, "no-replication").then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toMatchObject({ code: "CONFIGURATION", reason: "LOGICAL_REPLICATION_UNAVAILABLE" });
  });

  it("gives each table its own publication, slot and split with splitPerTable", async () => {
    const url = postgres().connectionString;
    await sql(url, "create table left_side (id int primary key)");
    await sql(url, "create table right_side (id int primary key)");
    const source = new PostgresChangesSource({
      connection: url,
      tables: ["left_side", "public.right_side"],
      splitPerTable: true,
      initialSnapshot: false,
      slotName: "sides",
    });
    const splits = await source.discoverSplits({
      jobId: "sides",
      parallelism: 2,
      logger: createMemoryLogger(),
    });
    expect(splits.map((split) => [split.splitId, split.slotName, split.publication])).toEqual([
      ["left_side", "sides_left_side", "onceflow_sides_left_side"],
      ["public.right_side", "sides_public_right_side", "onceflow_sides_public_right_side"],
    ]);
    const [leftSplit, rightSplit] = splits;
    const left = await openReader(
      {
        connection: url,
        tables: ["left_side"],
        splitPerTable: true,
        initialSnapshot: false,
        slotName: "sides",
      },
      "sides",
      [leftSplit!],
    );
    const right = await openReader(
      {
        connection: url,
        tables: ["public.right_side"],
        splitPerTable: true,
        initialSnapshot: false,
        slotName: "sides",
      },
      "sides",
      [rightSplit!],
    );
    try {
      await sql(url, "insert into left_side values (1)");
      await sql(url, "insert into right_side values (2)");
      expect((await readRecords(left.reader, 2, 20)).map((r) => [r.table, r.after?.id])).toEqual([
        ["left_side", 1],
      ]);
      expect((await readRecords(right.reader, 2, 20)).map((r) => [r.table, r.after?.id])).toEqual([
        ["right_side", 2],
      ]);
      const slots = await sql<{ slot_name: string }>(
        url,
        "select slot_name from pg_replication_slots where slot_name like 'sides_%' order by 1",
      );
      expect(slots.map((row) => row.slot_name)).toEqual(["sides_left_side", "sides_public_right_side"]);
    } finally {
      await left.reader.close();
      await right.reader.close();
    }
  });

  it("keeps every queued message intact while the stream runs ahead of the reader", async () => {
    const url = postgres().connectionString;
    await sql(url, "create table backlog (id int primary key, payload text)");
    const { reader } = await openReader(
      { connection: url, tables: ["backlog"], initialSnapshot: false, maxBatchSize: 5000 },
      "backlog",
    );
    try {
      // Many small transactions arrive while nothing is polled: the driver reuses its receive buffer
      // meanwhile, and what the source queued must not change under it.
      await sql(
        url,
        `do $$ begin for i in 1..1500 loop
           insert into backlog values (i, repeat(chr(65 + i % 26), 40 + i % 50)); commit;
         end loop; end $$`,
      );
      const records = await readRecords(reader, 1500);
      expect(records.map((r) => r.after?.id)).toEqual(Array.from({ length: 1500 }, (_, i) => i + 1));
      for (const record of records) {
        const id = record.after?.id as number;
        expect(record.after?.payload).toBe(String.fromCharCode(65 + (id % 26)).repeat(40 + (id % 50)));
      }
    } finally {
      await reader.close();
    }
  });
});
