import { OnceflowError } from "@onceflow/core";

/**
 * What {@link importOptionalModule} needs to say when a package is missing: who needs it and the
 * command that installs it.
 *
 * @example
 * ```ts
 * const need: OptionalModuleNeed = { neededBy: "startKafka()", install: "npm i -D kafkajs@2.2.4" };
 * ```
 */
export interface OptionalModuleNeed {
  /** The testkit feature that needs the package, e.g. `startKafka()`. */
  readonly neededBy: string;
  /** The command that installs it, e.g. `npm i -D kafkajs@2.2.4`. */
  readonly install: string;
}

function isModuleNotFound(error: unknown, specifier: string): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code !== "ERR_MODULE_NOT_FOUND" && code !== "MODULE_NOT_FOUND") return false;
  // Only the package itself: a missing file *inside* an installed package is another problem.
  return (
    (error as Error).message.includes(`'${specifier}'`) || (error as Error).message.includes(`"${specifier}"`)
  );
}

/**
 * Imports a package the testkit uses for one feature only (kafkajs for Kafka, pg for PostgreSQL), so
 * that installing `@onceflow/testkit` does not pull it into every connector. When it is not
 * installed, throws an `OnceflowError` with code `CONFIGURATION` naming the package and the command
 * that installs it. `load` does the import (a literal `import("…")`, so bundlers see it).
 *
 * @example
 * ```ts
 * const kafkajs = await importOptionalModule("kafkajs", () => import("kafkajs"), {
 *   neededBy: "startKafka()",
 *   install: "npm i -D kafkajs@2.2.4",
 * });
 * ```
 */
export async function importOptionalModule<T>(
  specifier: string,
  load: () => Promise<T>,
  need: OptionalModuleNeed,
): Promise<T> {
  try {
    return await load();
  } catch (error) {
    if (!isModuleNotFound(error, specifier)) throw error;
    throw new OnceflowError(
      "CONFIGURATION",
      `${need.neededBy} needs the package "${specifier}", which is not installed. It is an optional peer ` +
        `dependency of @onceflow/testkit (only the services that use it load it): ${need.install}`,
      { cause: error, details: { package: specifier, neededBy: need.neededBy } },
    );
  }
}
