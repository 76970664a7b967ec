import type pgTypes from "pg";
import { importOptionalModule } from "../../runtime/optional-module.js";

/**
 * The `pg` module (its default export). An optional peer dependency of the testkit, loaded only by
 * the PostgreSQL service (`startPostgres`).
 *
 * @example
 * ```ts
 * const pg: PgModule = await loadPg();
 * const client = new pg.Client({ connectionString });
 * ```
 */
export type PgModule = typeof pgTypes;

/**
 * What to run to get the PostgreSQL service's client library.
 *
 * @example
 * ```ts
 * console.log(PG_INSTALL_HINT); // "npm i -D pg"
 * ```
 */
export const PG_INSTALL_HINT = "npm i -D pg@^8.23.1";

let loading: Promise<PgModule> | undefined;

/**
 * Loads pg once; when it is not installed, rejects with an `OnceflowError` (`CONFIGURATION`) that
 * says to install it.
 *
 * @example
 * ```ts
 * const pg = await loadPg();
 * ```
 */
export function loadPg(): Promise<PgModule> {
  loading ??= importOptionalModule("pg", async () => (await import("pg")).default, {
    neededBy: "The testkit's PostgreSQL service (startPostgres)",
    install: PG_INSTALL_HINT,
  }).catch((error: unknown) => {
    loading = undefined;
    throw error;
  });
  return loading;
}
