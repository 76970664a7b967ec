import { existsSync, readdirSync } from "node:fs";
import { delimiter, join } from "node:path";
import { runCommand } from "../../runtime/processes.js";

/**
 * The server binaries found on this machine.
 *
 * @example
 * ```ts
 * const found = await findPostgresBinaries();
 * if (!("problem" in found)) found.initdb; // "/usr/lib/postgresql/15/bin/initdb"
 * ```
 */
export interface PostgresBinaries {
  binDir: string;
  initdb: string;
  pgCtl: string;
  /** "15.14", from `postgres --version`. */
  version: string;
}

function hasServerBinaries(dir: string): boolean {
  return (
    existsSync(join(dir, "initdb")) && existsSync(join(dir, "pg_ctl")) && existsSync(join(dir, "postgres"))
  );
}

/**
 * The folders that may hold `initdb` and `pg_ctl`, most specific first: `$ONCEFLOW_POSTGRES_BIN`,
 * `pg_config --bindir` (given), PATH, then the usual install places (Debian's
 * /usr/lib/postgresql/<major>/bin newest first, Homebrew, /usr/local/pgsql/bin).
 *
 * @example
 * ```ts
 * candidateBinDirs(process.env, "/usr/bin");
 * ```
 */
export function candidateBinDirs(env: NodeJS.ProcessEnv, pgConfigBinDir?: string): string[] {
  const dirs: string[] = [];
  if (env.ONCEFLOW_POSTGRES_BIN) dirs.push(env.ONCEFLOW_POSTGRES_BIN);
  if (pgConfigBinDir) dirs.push(pgConfigBinDir);
  dirs.push(...(env.PATH ?? "").split(delimiter).filter((dir) => dir.length > 0));
  for (const root of ["/usr/lib/postgresql", "/usr/pgsql", "/opt/homebrew/opt", "/usr/local/opt"]) {
    let entries: string[] = [];
    try {
      entries = readdirSync(root);
    } catch {
      continue;
    }
    const majors = entries
      .filter((name) => /^(postgresql@)?\d+$/.test(name) || name === "postgresql")
      .sort((a, b) => Number(b.replace(/\D/g, "")) - Number(a.replace(/\D/g, "")));
    for (const name of majors) dirs.push(join(root, name, "bin"));
  }
  dirs.push("/usr/local/pgsql/bin");
  return [...new Set(dirs)];
}

/**
 * Finds the PostgreSQL server binaries (initdb, pg_ctl, postgres). Resolves with what was searched
 * when there are none (client-only installs have psql but no initdb).
 *
 * @example
 * ```ts
 * const found = await findPostgresBinaries();
 * if ("problem" in found) throw new Error(found.problem);
 * ```
 */
export async function findPostgresBinaries(
  env: NodeJS.ProcessEnv = process.env,
): Promise<PostgresBinaries | { problem: string }> {
  let pgConfigBinDir: string | undefined;
  try {
    const result = await runCommand("pg_config", ["--bindir"], { timeoutMs: 10_000, env });
    if (result.code === 0) pgConfigBinDir = result.stdout.trim();
  } catch {
    // no pg_config: the other places are still searched
  }
  const candidates = candidateBinDirs(env, pgConfigBinDir);
  const binDir = candidates.find(hasServerBinaries);
  if (binDir === undefined) {
    return {
      problem:
        "no PostgreSQL server binaries (initdb, pg_ctl, postgres) in $ONCEFLOW_POSTGRES_BIN, pg_config --bindir, " +
        "PATH, /usr/lib/postgresql/*/bin, /usr/pgsql-*/bin or Homebrew",
    };
  }
  const result = await runCommand(join(binDir, "postgres"), ["--version"], { timeoutMs: 10_000, env });
  const version = /(\d+(?:\.\d+)?)/.exec(result.stdout)?.[1] ?? "unknown";
  return { binDir, initdb: join(binDir, "initdb"), pgCtl: join(binDir, "pg_ctl"), version };
}
