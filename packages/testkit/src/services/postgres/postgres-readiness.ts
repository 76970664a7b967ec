import { setTimeout as sleep } from "node:timers/promises";
import { loadPg } from "./pg-loader.js";

/**
 * What a server said about itself once it accepted a connection.
 *
 * @example
 * ```ts
 * const { version, maxPreparedTransactions }: PostgresFacts = await readPostgresFacts(url);
 * ```
 */
export interface PostgresFacts {
  version: string;
  maxPreparedTransactions: number;
  /** `wal_level`: "logical" is needed for logical replication (change data capture). */
  walLevel: string;
}

/**
 * Connects once and reads the server version and `max_prepared_transactions`.
 *
 * @example
 * ```ts
 * const facts = await readPostgresFacts("postgresql://postgres@127.0.0.1:5432/postgres");
 * ```
 */
export async function readPostgresFacts(connectionString: string): Promise<PostgresFacts> {
  const pg = await loadPg();
  const client = new pg.Client({ connectionString, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    const result = await client.query<{
      server_version: string;
      max_prepared_transactions: string;
      wal_level: string;
    }>(
      "select current_setting('server_version') as server_version, " +
        "current_setting('max_prepared_transactions') as max_prepared_transactions, " +
        "current_setting('wal_level') as wal_level",
    );
    const row = result.rows[0];
    return {
      version: row?.server_version.split(" ")[0] ?? "unknown",
      maxPreparedTransactions: Number(row?.max_prepared_transactions ?? 0),
      walLevel: row?.wal_level ?? "unknown",
    };
  } finally {
    await client.end();
  }
}

/**
 * Polls until the server accepts connections (or `timeoutMs` passes). Resolves with its facts, or
 * with the last error message.
 *
 * @example
 * ```ts
 * const ready = await waitUntilPostgresAccepts(url, 60_000);
 * if ("problem" in ready) throw new Error(ready.problem);
 * ```
 */
export async function waitUntilPostgresAccepts(
  connectionString: string,
  timeoutMs: number,
): Promise<PostgresFacts | { problem: string }> {
  const deadline = Date.now() + timeoutMs;
  let problem = "not asked yet";
  while (Date.now() < deadline) {
    try {
      return await readPostgresFacts(connectionString);
    } catch (error) {
      problem = (error as Error).message;
    }
    await sleep(200);
  }
  return { problem: `no connection within ${timeoutMs} ms (last: ${problem})` };
}
