import { existsSync } from "node:fs";
import { join } from "node:path";
import { runCommand } from "../../runtime/processes.js";

/**
 * A Java runtime found on this machine.
 *
 * @example
 * ```ts
 * const java: JavaRuntime = { command: "java", version: "17.0.15", major: 17 };
 * ```
 */
export interface JavaRuntime {
  command: string;
  /** Full version string, e.g. "17.0.15". */
  version: string;
  major: number;
}

/**
 * Reads the major version out of `java -version` output ("1.8.0_392" is 8, "17.0.15" is 17).
 *
 * @example
 * ```ts
 * parseJavaVersion('openjdk version "17.0.15" 2025-04-15'); // { version: "17.0.15", major: 17 }
 * ```
 */
export function parseJavaVersion(output: string): { version: string; major: number } | undefined {
  const match = /version "([^"]+)"/.exec(output);
  const version = match?.[1];
  if (version === undefined) return undefined;
  const parts = version.split(/[._-]/);
  const major = parts[0] === "1" ? Number(parts[1]) : Number(parts[0]);
  return Number.isFinite(major) ? { version, major } : undefined;
}

/**
 * Finds Java: `$JAVA_HOME/bin/java` when set, else `java` on PATH. Resolves with what was tried when
 * there is none.
 *
 * @example
 * ```ts
 * const java = await findJava();
 * if ("problem" in java) throw new Error(java.problem);
 * ```
 */
export async function findJava(
  env: NodeJS.ProcessEnv = process.env,
): Promise<JavaRuntime | { problem: string }> {
  const candidates: string[] = [];
  if (env.JAVA_HOME) candidates.push(join(env.JAVA_HOME, "bin", "java"));
  candidates.push("java");
  const tried: string[] = [];
  for (const command of candidates) {
    if (command !== "java" && !existsSync(command)) {
      tried.push(`${command} (missing)`);
      continue;
    }
    try {
      const result = await runCommand(command, ["-version"], { timeoutMs: 20_000, env });
      const parsed = parseJavaVersion(`${result.stderr}${result.stdout}`);
      if (result.code === 0 && parsed !== undefined) return { command, ...parsed };
      tried.push(`${command} (exit ${result.code}, no version)`);
    } catch (error) {
      tried.push(`${command} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
  }
  return { problem: `no Java runtime (tried ${tried.join(", ")})` };
}
