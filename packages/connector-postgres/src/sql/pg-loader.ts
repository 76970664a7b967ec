/**
 * pg is loaded on first use, not when the connector is imported. A job module is also imported
 * where no connection is ever made — the main thread of a job whose subtasks run in worker threads
 * imports it only to read the job's graph, before it starts the threads — and pg (about 50 ms to
 * load) would be most of what this connector adds to that import. Every value taken from pg goes
 * through this module; type imports cost nothing at run time.
 */
import { createRequire } from "node:module";
import type * as Pg from "pg";

const requirePg = createRequire(import.meta.url);
let loaded: typeof Pg | undefined;

/**
 * The pg driver (`Pool`, `Client`, `escapeIdentifier` …), loaded on the first call.
 *
 * @example
 * ```ts
 * const pool = new (pgDriver().Pool)({ connectionString: process.env.DATABASE_URL });
 * ```
 */
export function pgDriver(): typeof Pg {
  loaded ??= requirePg("pg") as typeof Pg;
  return loaded;
}
