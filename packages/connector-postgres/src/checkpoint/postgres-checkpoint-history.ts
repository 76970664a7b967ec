import {
  assertHistorySize,
  type CheckpointHistoryEntry,
  compareHistoryEntries,
  parseHistoryEntry,
  validateHistoryEntry,
} from "@onceflow/core";
import type pg from "pg";
import type { TableName } from "../sql/identifiers.js";

/**
 * The `CREATE TABLE` of a checkpoint history table: one row per entry, numbered in the order
 * recorded, so that the newest `keep` of a scope are the highest numbers.
 */
export function historyTableStatement(history: TableName): string {
  return `CREATE TABLE IF NOT EXISTS ${history.sql} (
     job_id text NOT NULL, scope text NOT NULL, entry_number bigint GENERATED ALWAYS AS IDENTITY,
     entry jsonb NOT NULL, recorded_at timestamptz NOT NULL DEFAULT now(),
     PRIMARY KEY (job_id, scope, entry_number))`;
}

/**
 * Inserts one history entry and deletes the scope's entries beyond the newest `keep`, in one
 * statement (one round trip, one implicit transaction; no wait for other writers of the scope).
 */
export async function recordHistoryRow(
  pool: pg.Pool,
  history: TableName,
  entry: CheckpointHistoryEntry,
  keep: number,
): Promise<void> {
  validateHistoryEntry(entry);
  assertHistorySize(keep);
  await pool.query(
    // The DELETE does not see the row its CTE inserts (one snapshot): it keeps the newest keep - 1
    // rows that were there before, and the new one stays.
    `WITH inserted AS (INSERT INTO ${history.sql} (job_id, scope, entry) VALUES ($1, $2, $3))
     DELETE FROM ${history.sql}
      WHERE job_id = $1 AND scope = $2
        AND entry_number NOT IN (
          SELECT entry_number FROM ${history.sql} WHERE job_id = $1 AND scope = $2
           ORDER BY entry_number DESC LIMIT ($4::int - 1))`,
    [entry.jobId, entry.scope, JSON.stringify(entry), keep],
  );
}

/** The job's history entries, every scope, oldest first; rows that are no entry are skipped. */
export async function readHistoryRows(
  pool: pg.Pool,
  history: TableName,
  jobId: string,
): Promise<CheckpointHistoryEntry[]> {
  const result = await pool.query<{ entry: unknown }>(
    `SELECT entry FROM ${history.sql} WHERE job_id = $1 ORDER BY scope, entry_number`,
    [jobId],
  );
  const entries: CheckpointHistoryEntry[] = [];
  for (const row of result.rows) {
    const entry = parseHistoryEntry(JSON.stringify(row.entry));
    if (entry !== undefined && entry.jobId === jobId) entries.push(entry);
  }
  return entries.sort(compareHistoryEntries);
}
