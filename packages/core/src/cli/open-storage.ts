import { stat } from "node:fs/promises";
import { resolve } from "node:path";
import type { CheckpointStorage } from "../checkpoint/checkpoint-storage.js";
import { FileSystemCheckpointStorage } from "../checkpoint/filesystem-checkpoint-storage.js";
import { ConfigurationError } from "../errors/onceflow-error.js";
import type { CliIo } from "./io.js";

/**
 * Opens the `filesystem(dir)` checkpoint storage of the read-only commands (`checkpoints`, `ui`):
 * the folder must exist, and corrupt checkpoint folders are left out of `list` (the commands report
 * them themselves).
 *
 * @throws ConfigurationError naming `<dir>` when it is not a folder.
 * @example
 * ```ts
 * const storage = await openFilesystemStorage(io, "./checkpoints");
 * ```
 */
export async function openFilesystemStorage(io: CliIo, dir: string): Promise<FileSystemCheckpointStorage> {
  const root = resolve(io.cwd, dir);
  const info = await stat(root).catch(() => undefined);
  if (info === undefined || !info.isDirectory()) {
    throw new ConfigurationError(
      "<dir>",
      `${root} is not a folder; give the path the job passed to filesystem()`,
    );
  }
  return new FileSystemCheckpointStorage(root, { corruptCheckpoints: "skip" });
}

/** Where a PostgreSQL checkpoint storage is: the settings of `PostgresCheckpointStorage`. */
export interface PostgresStorageSettings {
  /** A connection string, such as `postgresql://onceflow@db:5432/app`. */
  readonly connection: string;
  readonly schema?: string;
  readonly table?: string;
}

// Not a dependency of the core: loaded only when asked for, from where the core is installed.
const POSTGRES_CONNECTOR = "@onceflow/connector-postgres";

/**
 * Opens a `PostgresCheckpointStorage` (from `@onceflow/connector-postgres`, loaded on demand: the
 * core does not depend on it) for reading, without creating tables.
 *
 * @throws ConfigurationError when the connector is not installed.
 * @example
 * ```ts
 * const storage = await openPostgresStorage({ connection: process.env.DATABASE_URL! });
 * ```
 */
export async function openPostgresStorage(settings: PostgresStorageSettings): Promise<CheckpointStorage> {
  let connector: { PostgresCheckpointStorage?: new (options: Record<string, unknown>) => CheckpointStorage };
  try {
    connector = (await import(POSTGRES_CONNECTOR)) as typeof connector;
  } catch (cause) {
    throw new ConfigurationError(
      "--postgres",
      `reading checkpoints from PostgreSQL needs ${POSTGRES_CONNECTOR}: install it next to @onceflow/core (npm install ${POSTGRES_CONNECTOR})`,
      { cause },
    );
  }
  const Storage = connector.PostgresCheckpointStorage;
  if (Storage === undefined) {
    throw new ConfigurationError(
      "--postgres",
      `${POSTGRES_CONNECTOR} has no PostgresCheckpointStorage export`,
    );
  }
  return new Storage({
    connection: settings.connection,
    createTables: false,
    ...(settings.schema === undefined ? {} : { schema: settings.schema }),
    ...(settings.table === undefined ? {} : { table: settings.table }),
  });
}
