import type { Command } from "commander";
import type { CheckpointStorage } from "../../checkpoint/checkpoint-storage.js";
import { unknownJobWarning } from "../../dashboard/checkpoint-history.js";
import { serveDashboard } from "../../dashboard/serve-dashboard.js";
import { ConfigurationError } from "../../errors/onceflow-error.js";
import type { CliIo } from "../io.js";
import { openFilesystemStorage, openPostgresStorage } from "../open-storage.js";

interface UiOptions {
  job: string;
  port: string;
  host: string;
  metricsUrl?: string;
  postgres?: string;
  postgresSchema?: string;
  postgresTable?: string;
}

/** Replaceable parts of `ui`, for tests. */
export interface UiCommandOptions {
  /** Resolves when the dashboard must stop (default: on SIGINT or SIGTERM). */
  readonly untilStopped?: (url: string) => Promise<void>;
}

/**
 * Adds `ui` to the program: serves the checkpoint dashboard of a job from its checkpoint storage
 * (a `filesystem` folder, or PostgreSQL with `--postgres`) and, with `--metrics-url`, the live
 * metrics of the running job, until SIGINT or SIGTERM.
 *
 * @example
 * ```ts
 * addUiCommand(program, processIo());
 * // onceflow ui ./checkpoints --job orders --port 8080 --metrics-url http://127.0.0.1:9464/metrics
 * ```
 */
export function addUiCommand(program: Command, io: CliIo, options: UiCommandOptions = {}): void {
  program
    .command("ui")
    .description("serve a read-only dashboard of a job's checkpoints (and live metrics) on 127.0.0.1")
    .argument("[dir]", "the storage folder (the path given to filesystem()); or use --postgres")
    .requiredOption("--job <id>", "the job")
    .option("--port <port>", "the port to listen on (0: any free port)", "8080")
    .option("--host <host>", "the address to bind; anything but 127.0.0.1 exposes the page", "127.0.0.1")
    .option(
      "--metrics-url <url>",
      "the running job's Prometheus endpoint, e.g. http://127.0.0.1:9464/metrics",
    )
    .option(
      "--postgres <connection>",
      "read the checkpoints from PostgreSQL (needs @onceflow/connector-postgres)",
    )
    .option("--postgres-schema <schema>", "the schema of the checkpoint tables (default public)")
    .option("--postgres-table <table>", "the checkpoint table (default onceflow_checkpoints)")
    .action(async (dir: string | undefined, ui: UiOptions) => {
      const port = parsePort(ui.port);
      if (ui.metricsUrl !== undefined) checkUrl(ui.metricsUrl);
      const storage = await openStorage(io, dir, ui);
      try {
        const dashboard = await serveDashboard({
          storage,
          jobId: ui.job,
          port,
          host: ui.host,
          ...(ui.metricsUrl === undefined ? {} : { metricsUrl: ui.metricsUrl }),
        });
        io.stdout(`dashboard of job ${ui.job} (${storage.description}) at ${dashboard.url}\n`);
        const known = await knowsJob(storage, ui.job).catch(() => true);
        if (!known) io.stderr(`warning: ${await unknownJobWarning(storage, ui.job)}\n`);
        try {
          await (options.untilStopped ?? untilSignal)(dashboard.url);
        } finally {
          await dashboard.close();
        }
      } finally {
        await storage.close?.();
      }
    });
}

async function openStorage(io: CliIo, dir: string | undefined, ui: UiOptions): Promise<CheckpointStorage> {
  if (ui.postgres !== undefined) {
    if (dir !== undefined) {
      throw new ConfigurationError("<dir>", "give either a storage folder or --postgres, not both");
    }
    return openPostgresStorage({
      connection: ui.postgres,
      ...(ui.postgresSchema === undefined ? {} : { schema: ui.postgresSchema }),
      ...(ui.postgresTable === undefined ? {} : { table: ui.postgresTable }),
    });
  }
  if (dir === undefined) {
    throw new ConfigurationError(
      "<dir>",
      "give the checkpoint folder (the path passed to filesystem()) or --postgres <connection>",
    );
  }
  return openFilesystemStorage(io, dir);
}

function parsePort(text: string): number {
  const port = Number(text);
  if (!/^\d+$/.test(text) || port > 65_535) {
    throw new ConfigurationError(
      "--port",
      `a port is a whole number from 0 to 65535, got ${JSON.stringify(text)}`,
    );
  }
  return port;
}

function checkUrl(text: string): void {
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== "http:" && url.protocol !== "https:")) {
    throw new ConfigurationError(
      "--metrics-url",
      "give the job's metrics endpoint as an http(s) URL, e.g. http://127.0.0.1:9464/metrics",
    );
  }
}

function untilSignal(): Promise<void> {
  return new Promise((resolve) => {
    const stop = (): void => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      resolve();
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  });
}

/** Whether the storage has anything of the job: a checkpoint, a history entry or an incarnation. */
async function knowsJob(storage: CheckpointStorage, jobId: string): Promise<boolean> {
  const [listed, history, scopes] = await Promise.all([
    storage.list(jobId),
    storage.readHistory(jobId),
    storage.claimedScopes(jobId),
  ]);
  return listed.length > 0 || history.length > 0 || scopes.length > 0;
}
