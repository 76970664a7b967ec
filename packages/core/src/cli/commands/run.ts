import { stat } from "node:fs/promises";
import { extname, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { Command } from "commander";
import { asOnceflowError, ConfigurationError, isOnceflowError } from "../../errors/onceflow-error.js";
import { defaultLogFormat, setDefaultLogger } from "../../observability/default-logger.js";
import { createConsoleLogger } from "../../observability/logger.js";
import { jobExecutionsSoFar } from "../../runtime/job-executions.js";
import type { JobLaunchOptions } from "../../runtime/job-launch-options.js";
import type { CliIo } from "../io.js";
import { applyLaunchToPrebuiltJob, checkLaunchHonoured, launchOptionsOf } from "../job-launch.js";
import { loadPrometheusMetrics, type PrometheusModule } from "../load-prometheus.js";
import { parseRunFlags, type RawRunFlags, type RunFlags } from "../run-flags.js";
import { type ObservableJob, startRunServices } from "../run-services.js";
import { runJobInThreads } from "../run-threads.js";

/** What `run` needs of a job: the runtime's `Job` fits (duck-typed, so any compatible object does). */
interface ExecutableJob extends ObservableJob {
  execute(): Promise<unknown>;
  /** Stop with a final checkpoint; called on SIGTERM/SIGINT when present. */
  stop?(): void;
}

const isExecutable = (value: unknown): value is ExecutableJob =>
  typeof value === "object" &&
  value !== null &&
  typeof (value as { execute?: unknown }).execute === "function";

/**
 * Adds `run <module>` to the program: imports a module and executes the job it exports.
 *
 * @example
 * ```ts
 * addRunCommand(program, processIo(), (url) => import(url));
 * ```
 */
export function addRunCommand(
  program: Command,
  io: CliIo,
  importModule: (url: string) => Promise<Record<string, unknown>>,
  importPrometheus?: () => Promise<PrometheusModule>,
): void {
  program
    .command("run")
    .description("run the job a module exports: `job` (a Job), or `createJob()` returning one")
    .argument("<module>", "the JavaScript module, relative to the current folder")
    .option("--job-export <name>", "the export to run instead: a Job, or a function returning one")
    .option("--subtask <index>", "run only this subtask: a number, or from-hostname (the -<n> of HOSTNAME)")
    .option(
      "--allow-non-restored-state",
      "restore even when the checkpoint holds state no operator claims (a renamed or removed uid): that state is dropped, with a warning",
    )
    .option(
      "--threads",
      "run every subtask in its own worker thread of this process (uses one core per subtask)",
    )
    .option(
      "--thread-max-young-generation <MiB>",
      "with --threads: each thread's young generation at most this (default 48, V8's own sizing; 12 uses less memory, more CPU)",
    )
    .option(
      "--thread-max-old-generation <MiB>",
      "with --threads: each thread's old generation at most this; a thread past it fails the job alone",
    )
    .option("--metrics-port <port>", "serve /metrics, /healthz and /readyz on this port (0: a free one)")
    .option("--metrics-host <host>", "the address of --metrics-port (0.0.0.0 in a pod)", "127.0.0.1")
    .option(
      "--no-default-metrics",
      "serve only the job's metrics, without prom-client's process_* and nodejs_* metrics",
    )
    .option(
      "--ready-max-checkpoint-age <ms>",
      "/readyz fails when no checkpoint completed for this long (default: 3 intervals, at least 60000)",
    )
    .option("--ui-port <port>", "serve the checkpoint dashboard on this port (0: a free one)")
    .option("--ui-host <host>", "the address of --ui-port", "127.0.0.1")
    .option(
      "--restore <setting>",
      "where the job starts: latest (default), none (empty), or a checkpoint id; none and an id are applied once — the lineage they start records them, so a restart with the same arguments (a pod Kubernetes restarts) goes on from the latest checkpoint",
    )
    .option(
      "--log-level <level>",
      "debug, info, warn, error or silent: the job's log on stderr, for jobs given no logger (default: ONCEFLOW_LOG_LEVEL, else info)",
    )
    .option(
      "--log-format <format>",
      "text or json (default: ONCEFLOW_LOG_FORMAT, else text when stderr is a terminal, json lines otherwise)",
    )
    .action(async (modulePath: string, options: RawRunFlags) => {
      const flags = parseRunFlags(options, process.env);
      const path = resolve(io.cwd, modulePath);
      if ((await stat(path).catch(() => undefined))?.isFile() !== true) {
        throw new ConfigurationError("<module>", `${path} is not a file`);
      }
      const logFormat = flags.logFormat ?? defaultLogFormat();
      // Set before the module is imported, so that a job built (or run) at import logs here too.
      const previousLogger = setDefaultLogger(
        createConsoleLogger({ level: flags.logLevel, format: logFormat, stream: { write: io.stderr } }),
      );
      try {
        if (flags.threads) {
          // Each thread makes its own default logger from these (a thread has no terminal of its own).
          process.env.ONCEFLOW_LOG_LEVEL = flags.logLevel;
          process.env.ONCEFLOW_LOG_FORMAT = logFormat;
          return await runJobInThreads(path, flags, io);
        }
        await runModuleJob(path, flags, io, importModule, importPrometheus);
      } finally {
        setDefaultLogger(previousLogger);
      }
    });
}

async function runModuleJob(
  path: string,
  flags: RunFlags,
  io: CliIo,
  importModule: (url: string) => Promise<Record<string, unknown>>,
  importPrometheus: (() => Promise<PrometheusModule>) | undefined,
): Promise<void> {
  const executionsBefore = jobExecutionsSoFar();
  const exports = await importModule(pathToFileURL(path).href).catch((cause: unknown) => {
    throw new ConfigurationError("<module>", `cannot import ${path}: ${importHint(path, cause)}`, {
      cause,
    });
  });
  const ranAtImport = jobExecutionsSoFar() > executionsBefore;
  const metrics =
    flags.metricsPort !== undefined
      ? await loadPrometheusMetrics(importPrometheus, { defaultMetrics: flags.defaultMetrics })
      : flags.uiPort !== undefined
        ? // The dashboard shows live metrics when prom-client is there, and goes on without them.
          await loadPrometheusMetrics(importPrometheus, { defaultMetrics: flags.defaultMetrics }).catch(
            () => undefined,
          )
        : undefined;
  const job = await findJob(
    exports,
    flags.jobExport,
    {
      ...launchOptionsOf(flags.subtaskIndex, metrics, flags.restore),
      ...(flags.allowNonRestoredState ? { allowNonRestoredState: true } : {}),
    },
    ranAtImport,
  );
  const services = await startRunServices(job, flags, metrics, io);
  // SIGTERM/SIGINT stop the job with a final checkpoint (stop-with-savepoint), then exit 0.
  const stop = (): void => job.stop?.();
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  let result: unknown;
  try {
    result = await job.execute();
  } catch (error) {
    throw isOnceflowError(error) ? error : asOnceflowError(error, "JOB_FAILED");
  } finally {
    process.off("SIGTERM", stop);
    process.off("SIGINT", stop);
    await services.close();
  }
  io.stdout(`job finished${describeResult(result)}\n`);
  if ((result as { resumedAtEndOfInput?: unknown } | undefined)?.resumedAtEndOfInput === true) {
    const checkpointId = (result as { restoredCheckpointId?: unknown }).restoredCheckpointId;
    io.stdout(
      `nothing new was read: the job restored checkpoint ${String(checkpointId)}, the final checkpoint of a run whose input had ended. To run it from the start, use a new job id or empty checkpoint storage, or --restore none once (applied once: started again with it, the job goes on from that fresh start's latest checkpoint)\n`,
    );
  }
}

async function findJob(
  exports: Record<string, unknown>,
  exportName: string | undefined,
  launch: JobLaunchOptions,
  ranAtImport: boolean,
): Promise<ExecutableJob> {
  const available = Object.keys(exports).sort().join(", ") || "nothing";
  if (ranAtImport) {
    // Running it again would start from its own final checkpoint, and without the CLI's metrics.
    throw new ConfigurationError(
      "<module>",
      `the module ran a job when it was imported (it calls execute() at its top level; it exports ${available}): onceflow run executes the job itself. Export createJob(launch) returning the job, and call execute() only when the file is run by node: if (process.argv[1] === fileURLToPath(import.meta.url)) await createJob().execute()`,
    );
  }
  let name: string;
  if (exportName !== undefined) {
    if (!(exportName in exports)) {
      throw new ConfigurationError(
        "--job-export",
        `the module has no export "${exportName}"; it exports ${available}`,
      );
    }
    name = exportName;
  } else if ("job" in exports) {
    name = "job";
  } else if ("createJob" in exports) {
    name = "createJob";
  } else {
    throw new ConfigurationError(
      "<module>",
      `the module exports neither "job" nor "createJob" (it exports ${available}); name the export with --job-export`,
    );
  }
  let candidate = exports[name];
  const prebuilt = isExecutable(candidate);
  if (!prebuilt && typeof candidate === "function") {
    try {
      candidate = await (candidate as (launch: JobLaunchOptions) => unknown)(launch);
    } catch (error) {
      throw isOnceflowError(error) ? error : asOnceflowError(error, "CONFIGURATION");
    }
  }
  if (!isExecutable(candidate)) {
    throw new ConfigurationError(
      exportName === undefined ? "<module>" : "--job-export",
      `export "${name}" is not a job (an object with execute()) nor a function returning one`,
    );
  }
  if (prebuilt) applyLaunchToPrebuiltJob(candidate, name, launch);
  else checkLaunchHonoured(candidate, name, launch);
  return candidate;
}

function importHint(path: string, cause: unknown): string {
  const message = cause instanceof Error ? cause.message : String(cause);
  const code = (cause as { code?: unknown } | null)?.code;
  if (code === "ERR_UNKNOWN_FILE_EXTENSION" && [".ts", ".mts", ".cts"].includes(extname(path))) {
    return `${message} (compile it to JavaScript, or run the CLI with NODE_OPTIONS="--import tsx")`;
  }
  return message;
}

function describeResult(result: unknown): string {
  if (result === undefined || result === null) return "";
  try {
    return `: ${JSON.stringify(result)}`;
  } catch {
    return "";
  }
}
