/**
 * The server-side objects a change source needs, made on first start: its publications and its
 * replication slots. Everything here runs on an ordinary (non-replication) connection.
 */
import type pg from "pg";
import { PostgresConfigurationError, PostgresErrorReason } from "../errors/postgres-errors.js";
import { quote, shortHash } from "../sql/identifiers.js";
import { splitTableName } from "./initial-snapshot.js";

/** A pool or a client: what runs one statement. */
export type Queryable = Pick<pg.ClientBase, "query">;

/** Longest identifier PostgreSQL keeps (NAMEDATALEN - 1). */
const MAX_NAME = 63;

/**
 * A name PostgreSQL accepts for a replication slot ([a-z0-9_], at most 63 characters), derived from
 * `parts`; a long one keeps a hash of the whole so two long names stay apart.
 *
 * @example
 * ```ts
 * replicationName("onceflow", "Orders-Job"); // "onceflow_orders_job"
 * ```
 */
export function replicationName(...parts: string[]): string {
  const joined = parts.join("_");
  const clean = joined.toLowerCase().replace(/[^a-z0-9_]/g, "_");
  if (clean.length <= MAX_NAME) return clean;
  return `${clean.slice(0, MAX_NAME - 13)}_${shortHash(joined)}`;
}

/** Fails with a message that says what to change when the server cannot stream changes. */
export async function checkLogicalReplication(client: Queryable): Promise<void> {
  const row = (
    await client.query<{ wal_level: string; replication: boolean }>(
      "select current_setting('wal_level') as wal_level, rolreplication or rolsuper as replication from pg_roles where rolname = current_user",
    )
  ).rows[0];
  if (row?.wal_level !== "logical") {
    throw new PostgresConfigurationError(
      "connection",
      PostgresErrorReason.logicalReplicationUnavailable,
      `the server runs with wal_level=${row?.wal_level ?? "unknown"}: set wal_level = logical in postgresql.conf ` +
        "(on managed services, the logical replication parameter) and restart the server",
    );
  }
  if (row.replication !== true) {
    throw new PostgresConfigurationError(
      "connection",
      PostgresErrorReason.logicalReplicationUnavailable,
      "the connecting role may not replicate: ALTER ROLE … WITH REPLICATION (or connect as a role that has it)",
    );
  }
}

/**
 * Makes publication `name` for `tables` unless it exists; when it exists (the user's own), checks
 * that it publishes every table in `tables`. Returns the tables to capture: `tables`, or when empty
 * the publication's own tables.
 */
export async function ensurePublication(
  client: Queryable,
  name: string,
  tables: readonly string[],
  setting: string,
): Promise<string[]> {
  const exists =
    (await client.query("select 1 from pg_publication where pubname = $1", [name])).rowCount === 1;
  if (!exists) {
    if (tables.length === 0) {
      throw new PostgresConfigurationError(
        setting,
        PostgresErrorReason.invalidOption,
        `publication "${name}" does not exist: give 'tables' so onceflow can create it, or create it yourself`,
      );
    }
    const list = tables.map((table) => {
      const { schema, name: tableName } = splitTableName(table);
      return `${quote(schema)}.${quote(tableName)}`;
    });
    try {
      await client.query(`create publication ${quote(name)} for table ${list.join(", ")}`);
    } catch (error) {
      // Two subtasks may create it at once: the loser finds it made.
      if ((error as { code?: string }).code !== "42710") throw error;
    }
    return [...tables];
  }
  const published = (
    await client.query<{ table: string }>(
      "select schemaname || '.' || tablename as table from pg_publication_tables where pubname = $1",
      [name],
    )
  ).rows.map((row) => row.table);
  const qualified = tables.map((table) => {
    const { schema, name: tableName } = splitTableName(table);
    return `${schema}.${tableName}`;
  });
  const missing = qualified.filter((table) => !published.includes(table));
  if (missing.length > 0) {
    throw new PostgresConfigurationError(
      setting,
      PostgresErrorReason.publicationMismatch,
      `publication "${name}" does not publish ${missing.join(", ")}: ALTER PUBLICATION ${quote(name)} ADD TABLE …, or capture only the tables it has`,
    );
  }
  return qualified.length > 0 ? qualified : published;
}

/** The slot's state, or undefined when it does not exist. */
export async function slotState(
  client: Queryable,
  slotName: string,
): Promise<{ active: boolean; confirmedFlushLsn: string | null; walStatus: string | null } | undefined> {
  const row = (
    await client.query<{ active: boolean; confirmed_flush_lsn: string | null; wal_status: string | null }>(
      "select active, confirmed_flush_lsn::text, wal_status from pg_replication_slots where slot_name = $1",
      [slotName],
    )
  ).rows[0];
  return row === undefined
    ? undefined
    : { active: row.active, confirmedFlushLsn: row.confirmed_flush_lsn, walStatus: row.wal_status };
}

/** Drops a slot left by a start that never completed a checkpoint; none of its output was committed. */
export async function dropSlot(client: Queryable, slotName: string): Promise<void> {
  await client.query(
    "select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = $1",
    [slotName],
  );
}

/** Bytes of WAL the server keeps for the slot (from its restart_lsn to the current WAL position). */
export async function retainedWalBytes(client: Queryable, slotName: string): Promise<number | undefined> {
  const row = (
    await client.query<{ bytes: string | null }>(
      "select pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::text as bytes from pg_replication_slots where slot_name = $1",
      [slotName],
    )
  ).rows[0];
  return row?.bytes === null || row?.bytes === undefined ? undefined : Number(row.bytes);
}
