// testcontainers is an optional peer dependency: it is imported only when the Docker path is
// chosen, so a machine without it (or without Docker) never loads it.

/**
 * The `testcontainers` module, loaded on demand.
 *
 * @example
 * ```ts
 * const tc: TestcontainersModule = await loadTestcontainers();
 * ```
 */
export type TestcontainersModule = typeof import("testcontainers");
/**
 * The `@testcontainers/postgresql` module, loaded on demand.
 *
 * @example
 * ```ts
 * const pgModule: PostgresContainerModule = await loadPostgresContainerModule();
 * ```
 */
export type PostgresContainerModule = typeof import("@testcontainers/postgresql");

const INSTALL_HINT = "npm i -D testcontainers@11.14.0 @testcontainers/postgresql@11.14.0";

async function importOptional<T>(specifier: string): Promise<T> {
  try {
    return (await import(specifier)) as T;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND") {
      throw new Error(`${specifier} is not installed (${INSTALL_HINT})`, { cause: error });
    }
    throw error;
  }
}

/**
 * Loads `testcontainers`, with an install hint when it is missing.
 *
 * @example
 * ```ts
 * const { GenericContainer } = await loadTestcontainers();
 * ```
 */
export function loadTestcontainers(): Promise<TestcontainersModule> {
  return importOptional<TestcontainersModule>("testcontainers");
}

/**
 * Loads `@testcontainers/postgresql`, with an install hint when it is missing.
 *
 * @example
 * ```ts
 * const { PostgreSqlContainer } = await loadPostgresContainerModule();
 * ```
 */
export function loadPostgresContainerModule(): Promise<PostgresContainerModule> {
  return importOptional<PostgresContainerModule>("@testcontainers/postgresql");
}

/**
 * What to run to get the Docker provider's packages.
 *
 * @example
 * ```ts
 * throw new Error(`testcontainers is missing: ${TESTCONTAINERS_INSTALL_HINT}`);
 * ```
 */
export const TESTCONTAINERS_INSTALL_HINT = INSTALL_HINT;
