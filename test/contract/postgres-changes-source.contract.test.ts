import { setTimeout as sleep } from "node:timers/promises";
import {
  type PostgresChange,
  PostgresChangesSource,
  type PostgresChangesSplit,
} from "@onceflow/connector-postgres";
import {
  describeSource,
  type SourceContract,
  type SourceContractScope,
  usePrivatePostgres,
} from "@onceflow/testkit/vitest";
import pg from "pg";

// The source contract suite on PostgresChangesSource against a private server with
// wal_level=logical. One split per table (`splitPerTable`: a publication and a replication slot
// each); a case's input is one table per split, each `writeInput` one transaction of inserts, so
// small batches (maxBatchSize 2) hand a transaction out over several polls and checkpoints fall in
// the middle of one. Records written before a fresh start come from the initial snapshot, the rest
// from the slot. The commit-back is the slot's confirmed_flush_lsn: a transaction committed after
// the slot was created counts as consumed once the slot is at or past its commit's end, as the
// server then never sends it again (those before were read by the snapshot, not the slot). Only this file uses the server, so every backend left after the readers closed
// (a walsender, a snapshot or admin connection) is a leak.

const postgres = usePrivatePostgres({ walLevel: "logical", provider: "local" });
const url = () => postgres().connectionString;

async function sql<R extends pg.QueryResultRow = pg.QueryResultRow>(
  text: string,
  values: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client({ connectionString: url() });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

const tableOf = (scope: SourceContractScope, split: number) => `${scope.id}_t${split}`;
/** The case's slot and publication prefix: short, so `<prefix>_<table>` fits PostgreSQL's 63 characters. */
const prefixOf = (scope: SourceContractScope) => `c${scope.id.slice(-8)}`;

/** Per case and split: the WAL position right after each written transaction, and its record count. */
const commitsOf = new Map<string, Array<Array<{ endLsn: string; records: number }>>>();

/** Per slot: its confirmed_flush_lsn when it was created (records committed before came from the snapshot). */
const createdAt = new Map<string, string>();

/** Backends other than the asking one, as `backend_type application_name: query`. */
async function otherBackends(): Promise<string[]> {
  const rows = await sql<{ backend_type: string; application_name: string; query: string }>(
    "select backend_type, application_name, query from pg_stat_activity " +
      "where pid <> pg_backend_pid() and backend_type in ('client backend', 'walsender')",
  );
  return rows.map((row) => `${row.backend_type} '${row.application_name}': ${row.query.slice(0, 80)}`);
}

const contract: SourceContract<PostgresChange, PostgresChangesSplit> = {
  name: "PostgresChangesSource",
  setup: async (scope) => {
    commitsOf.set(
      scope.id,
      Array.from({ length: scope.splits }, () => []),
    );
    for (let split = 0; split < scope.splits; split++)
      await sql(`create table ${tableOf(scope, split)} (id int primary key, v text not null)`);
  },
  teardown: async (scope) => {
    commitsOf.delete(scope.id);
    // A closed reader's walsender may take a moment to go: its slot is busy until then.
    for (let attempt = 0; ; attempt++) {
      try {
        await sql(
          "select pg_drop_replication_slot(slot_name) from pg_replication_slots where starts_with(slot_name, $1)",
          [prefixOf(scope)],
        );
        break;
      } catch (error) {
        if (attempt >= 50) throw error;
        await sleep(100);
      }
    }
    for (const { pubname } of await sql<{ pubname: string }>(
      "select pubname from pg_publication where starts_with(pubname, $1)",
      [prefixOf(scope)],
    ))
      await sql(`drop publication ${pubname}`);
    for (let split = 0; split < scope.splits; split++)
      await sql(`drop table if exists ${tableOf(scope, split)}`);
  },
  writeInput: async (scope, split, records) => {
    const client = new pg.Client({ connectionString: url() });
    await client.connect();
    try {
      await client.query("begin");
      for (const record of records) {
        await client.query(`insert into ${tableOf(scope, split)} (id, v) values ($1, $2)`, [
          record.after?.id,
          record.after?.v,
        ]);
      }
      await client.query("commit");
      // Nothing else writes to this server meanwhile: the insert position now is the commit's end.
      const [row] = (await client.query<{ lsn: string }>("select pg_current_wal_insert_lsn()::text as lsn"))
        .rows;
      commitsOf.get(scope.id)?.[split]?.push({ endLsn: row?.lsn ?? "0/0", records: records.length });
    } finally {
      await client.end();
    }
  },
  createSource: (scope) => {
    const source = new PostgresChangesSource({
      connection: url(),
      tables: Array.from({ length: scope.splits }, (_, split) => tableOf(scope, split)),
      splitPerTable: true,
      publication: prefixOf(scope),
      slotName: prefixOf(scope),
      maxBatchSize: 2,
      snapshotPageSize: 2,
      statusIntervalMs: 200,
    });
    return {
      name: source.name,
      boundedness: source.boundedness,
      discoverSplits: (context) => source.discoverSplits(context),
      createReader: (context) => {
        const reader = source.createReader(context);
        const addSplits = reader.addSplits.bind(reader);
        // A split never started gets a new slot in addSplits: what it starts at came from the
        // initial snapshot, not from the slot.
        reader.addSplits = async (splits) => {
          await addSplits(splits);
          for (const split of splits) {
            if (split.flushLsn !== undefined) continue;
            const [slot] = await sql<{ lsn: string }>(
              "select confirmed_flush_lsn::text as lsn from pg_replication_slots where slot_name = $1",
              [split.slotName],
            );
            if (slot !== undefined) createdAt.set(split.slotName, slot.lsn);
          }
        };
        return reader;
      },
    };
  },
  createRecord: (index) => ({
    kind: "insert",
    schema: "public",
    table: "",
    before: null,
    beforeImage: "none",
    after: { id: index, v: `record-${index}` },
    unchangedToastColumns: [],
    commitLsn: "0/0",
    commitTime: null,
    xid: 0,
    changeIndex: 0,
  }),
  // Read through the snapshot (`read`) or the stream (`insert`): the same row either way.
  identify: (change) => `${change.after?.id}:${change.after?.v}`,
  committedPositions: async (scope) => {
    // The server applies a status update from the replication connection when its walsender reads it.
    await sleep(150);
    const commits = commitsOf.get(scope.id) ?? [];
    const counts: number[] = [];
    for (let split = 0; split < scope.splits; split++) {
      const slotName = `${prefixOf(scope)}_${tableOf(scope, split)}`;
      const [slot] = await sql<{ consumed: string }>(
        `select coalesce(sum(records), 0)::text as consumed
           from jsonb_to_recordset($2::jsonb) as c("endLsn" pg_lsn, records int),
                pg_replication_slots s
          where s.slot_name = $1 and s.confirmed_flush_lsn >= c."endLsn" and c."endLsn" > $3::pg_lsn`,
        [slotName, JSON.stringify(commits[split] ?? []), createdAt.get(slotName) ?? "0/0"],
      );
      counts.push(Number(slot?.consumed ?? 0));
    }
    return counts;
  },
  lingering: async () => {
    // A closed connection's backend ends a moment after the client hung up.
    let left = await otherBackends();
    for (let attempt = 0; attempt < 40 && left.length > 0; attempt++) {
      await sleep(50);
      left = await otherBackends();
    }
    return left;
  },
  splits: 3,
  recordsPerSplit: 5,
  timeout: 120_000,
};

describeSource(contract);
