import pg from "pg";

/**
 * The PostgreSQL with prepared transactions that integration tests use. Read in one place so the
 * source can switch to the testkit's `inject` later. A missing setting fails, it never skips.
 */
export function preparedPostgresUrl(): string {
  const url = process.env.ONCEFLOW_POSTGRES_URL;
  if (url === undefined || url === "") {
    throw new Error(
      "ONCEFLOW_POSTGRES_URL is not set: point it at a PostgreSQL with max_prepared_transactions > 0, e.g. postgresql://postgres@127.0.0.1:55432/postgres",
    );
  }
  return url;
}

/** The machine's own server, which has max_prepared_transactions = 0 (for the staging and 'auto' tests). */
export function noPreparedPostgresUrl(): string {
  return process.env.ONCEFLOW_POSTGRES_NO2PC_URL ?? "postgresql://postgres@127.0.0.1:5432/test";
}

/** A fresh connection per question, so answers never come from the sink's own sessions. */
export async function sql<R extends pg.QueryResultRow = pg.QueryResultRow>(
  url: string,
  text: string,
  values: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/** A name unique to this test run, for tables and sink ids on the shared server. */
export function uniqueName(prefix: string): string {
  return `${prefix}_${process.pid}_${Date.now().toString(36)}_${Math.floor(Math.random() * 1e6).toString(36)}`;
}

/** The gids of one sink id still prepared on the server. */
export async function preparedGids(url: string, sinkId: string): Promise<string[]> {
  const rows = await sql<{ gid: string }>(
    url,
    "SELECT gid FROM pg_prepared_xacts WHERE left(gid, length($1)) = $1",
    [`${sinkId}-`],
  );
  return rows.map((row) => row.gid).sort();
}
