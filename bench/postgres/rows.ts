// What both PostgreSQL benchmarks write and how they reach the server: rows of
// `(id bigint, key text, payload text ≈ 100 bytes)` and one short-lived connection per query.
import pg from "pg";

const PAYLOAD = "x".repeat(100);

/** The key of row `id`: 10,000 distinct keys. */
export const keyOf = (id: number): string => `k${id % 10_000}`;

/** The payload of row `id`: 100 bytes that start with the id. */
export const payloadOf = (id: number): string => `${id}-${PAYLOAD}`.slice(0, 100);

/** Runs `fn` on a fresh connection to `url` and closes it. */
export async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}
