import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Command, CommanderError } from "commander";
import type { DemoOptions } from "../demo/run-demo.js";
import { formatError } from "../errors/format-error.js";
import { addCheckpointsCommands } from "./commands/checkpoints.js";
import { addDemoCommand } from "./commands/demo.js";
import { addRunCommand } from "./commands/run.js";
import { addUiCommand } from "./commands/ui.js";
import { type CliIo, processIo } from "./io.js";
import type { PrometheusModule } from "./load-prometheus.js";

/** Replaceable parts of the CLI, for tests. */
export interface CliOptions {
  readonly io?: CliIo;
  /** Imports the module of `run` (default: `import()`). */
  readonly importModule?: (url: string) => Promise<Record<string, unknown>>;
  /** The demo of `demo` (default: `runDemo` from the demo folder). */
  readonly runDemo?: (options: DemoOptions) => Promise<unknown>;
  /** Imports the prom-client adapter for `run --metrics-port` (default: `import()` of it). */
  readonly importPrometheus?: () => Promise<PrometheusModule>;
}

/**
 * Builds the `onceflow` program. It never exits the process: errors reach `parseAsync`'s caller
 * (commander's own as `CommanderError`), so {@link runCli} or a test decides what to do.
 *
 * @example
 * ```ts
 * const out: string[] = [];
 * const io = { stdout: (t: string) => out.push(t), stderr: (t: string) => out.push(t), cwd: process.cwd() };
 * await createCli({ io }).parseAsync(["checkpoints", "list", "./checkpoints"], { from: "user" });
 * ```
 */
export function createCli(options: CliOptions = {}): Command {
  const io = options.io ?? processIo();
  const program = new Command("onceflow")
    .description("onceflow: exactly-once dataflow for Node.js")
    .version(packageVersion(), "-V, --version", "print the version")
    // Set before any subcommand is added: subcommands copy these settings when created.
    .exitOverride()
    .allowExcessArguments(false)
    .showSuggestionAfterError(true)
    .configureOutput({
      writeOut: (text) => io.stdout(text),
      writeErr: (text) => io.stderr(text),
      // Usage errors get the same `error [CODE]: message` shape as every other error.
      outputError: (text, write) => write(`error [CONFIGURATION]: ${text.replace(/^error: /, "")}`),
    });

  addRunCommand(
    program,
    io,
    options.importModule ?? ((url) => import(url) as Promise<Record<string, unknown>>),
    options.importPrometheus,
  );
  addCheckpointsCommands(program, io);
  addDemoCommand(program, io, options.runDemo);
  addUiCommand(program, io);
  return program;
}

/**
 * Runs the CLI with user arguments (without `node` and the script) and returns the exit code:
 * 0 on success, 1 after printing `error [CODE]: message` on stderr.
 *
 * @example
 * ```ts
 * process.exitCode = await runCli(process.argv.slice(2));
 * ```
 */
export async function runCli(args: readonly string[], options: CliOptions = {}): Promise<number> {
  const io = options.io ?? processIo();
  const program = createCli({ ...options, io });
  try {
    await program.parseAsync([...args], { from: "user" });
    return 0;
  } catch (error) {
    // Commander already printed its message (or the help / version).
    if (error instanceof CommanderError) return error.exitCode;
    io.stderr(`${formatError(error)}\n`);
    return 1;
  }
}

// Walks up from this file: src/cli/program.ts in development, dist/cli.js once built.
function packageVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let level = 0; level < 4; level += 1) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === "@onceflow/core" && typeof pkg.version === "string") return pkg.version;
    } catch {
      // Not here: look one level up.
    }
    dir = dirname(dir);
  }
  return "0.0.0-unknown";
}
