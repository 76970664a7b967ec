import { ConfigurationError, formatError } from "@onceflow/core";
import { Command, CommanderError } from "commander";
import { listPostgresSinkIds } from "../admin/registered-sink-ids.js";
import {
  listPostgresSinkTransactions,
  type PostgresSinkTransactions,
  type PostgresSinkTransactionsOptions,
  rollbackPostgresSinkTransactions,
} from "../admin/sink-transactions.js";

/**
 * Where the CLI writes. `main.ts` passes the process's streams; tests capture the text.
 *
 * @example
 * ```ts
 * const lines: string[] = [];
 * const io: PostgresCliIo = { stdout: (text) => lines.push(text), stderr: (text) => lines.push(text) };
 * ```
 */
export interface PostgresCliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
}

interface SinkFlags {
  readonly url: string;
  readonly sinkId: string;
  readonly checkpointBelow?: number;
  readonly controlSchema?: string;
  readonly markerTable?: string;
  readonly epochTable?: string;
}

/**
 * Builds the `onceflow-postgres` program: `transactions list` and `transactions rollback`, for the
 * prepared transactions and staging tables a `PostgresSink` left under its sink id. It never exits
 * the process; {@link runPostgresCli} turns errors into an exit code.
 *
 * @example
 * ```ts
 * await createPostgresCli(io).parseAsync(["transactions", "list", "--url", url, "--sink-id", "orders.out"], { from: "user" });
 * ```
 */
export function createPostgresCli(io: PostgresCliIo): Command {
  const program = new Command("onceflow-postgres")
    .description("onceflow's PostgreSQL tools")
    .exitOverride()
    .allowExcessArguments(false)
    .showSuggestionAfterError(true)
    .configureOutput({
      writeOut: (text) => io.stdout(text),
      writeErr: (text) => io.stderr(text),
      outputError: (text, write) => write(`error [CONFIGURATION]: ${text.replace(/^error: /, "")}`),
    });
  const transactions = program
    .command("transactions")
    .description("find and roll back a PostgresSink's prepared transactions and staging tables, by sink id");

  const controlOptions = (command: Command): Command =>
    command
      .option("--control-schema <schema>", "schema of the sinks' control tables (default: public)")
      .option("--marker-table <name>", "the sinks' markerTable (default: onceflow_sink_markers)")
      .option("--epoch-table <name>", "the sinks' epochTable (default: onceflow_sink_epochs)");
  const sinkOptions = (command: Command): Command =>
    controlOptions(
      command
        .requiredOption("--url <connection>", "connection string, e.g. postgresql://app@db:5432/app")
        .requiredOption(
          "--sink-id <id>",
          "the sink's id, as `onceflow-postgres sinks list` shows it: its sinkId option, else <jobId>.<operator uid> with characters other than letters, digits, _ . : made _ and a hash appended (events-to-pg + out: events_to_pg.out_<6 hex digits>); an id no sink registered is an error",
        )
        .option(
          "--checkpoint-below <n>",
          "only prepared transactions of checkpoints below n (staging tables have no checkpoint id: none are selected)",
          checkpointId,
        ),
    );

  controlOptions(
    program
      .command("sinks")
      .description("the PostgresSinks of a database")
      .command("list")
      .description("list the sink ids PostgresSinks registered in the control tables (what --sink-id takes)")
      .requiredOption("--url <connection>", "connection string, e.g. postgresql://app@db:5432/app"),
  )
    .option("--json", "print JSON instead of lines")
    .action(async (flags: Omit<SinkFlags, "sinkId"> & { json?: boolean }) => {
      const sinks = await listPostgresSinkIds({
        connection: flags.url,
        ...(flags.controlSchema === undefined ? {} : { controlSchema: flags.controlSchema }),
        ...(flags.markerTable === undefined ? {} : { markerTable: flags.markerTable }),
        ...(flags.epochTable === undefined ? {} : { epochTable: flags.epochTable }),
      });
      if (flags.json === true) io.stdout(`${JSON.stringify(sinks, null, 2)}\n`);
      else if (sinks.length === 0) io.stdout("no PostgresSink registered a sink id in this database\n");
      else
        io.stdout(
          sinks
            .map(
              (sink) =>
                `${sink.sinkId}  ${sink.subtasks} subtask(s)${sink.newestEpoch === undefined ? "" : `, epoch ${sink.newestEpoch}`}\n`,
            )
            .join(""),
        );
    });

  sinkOptions(
    transactions
      .command("list")
      .description(
        "list the sink's prepared transactions (every database of the server) and staging tables (this database)",
      ),
  )
    .option("--json", "print JSON instead of a table")
    .action(async (flags: SinkFlags & { json?: boolean }) => {
      const found = await listPostgresSinkTransactions(sinkOptionsOf(flags));
      io.stdout(flags.json === true ? `${JSON.stringify(found, null, 2)}\n` : table(found, Date.now()));
    });

  sinkOptions(
    transactions
      .command("rollback")
      .description(
        "roll back the sink's prepared transactions and drop its staging tables: only superseded ones (no run can commit them), or with --job-stopped all selected",
      ),
  )
    .option("--all", "every prepared transaction and staging table of the sink")
    .option(
      "--job-stopped",
      "every process of the job has stopped, and it ended with its final checkpoint or will never be restored: touch what is not superseded too",
    )
    .option("--dry-run", "print what would be rolled back and dropped, change nothing")
    .action(async (flags: SinkFlags & { all?: boolean; jobStopped?: boolean; dryRun?: boolean }) => {
      if ((flags.all === true) === (flags.checkpointBelow !== undefined)) {
        throw new ConfigurationError(
          "--all",
          "say what to roll back: --all, or --checkpoint-below <n> (prepared transactions of checkpoints below n), not both",
        );
      }
      const result = await rollbackPostgresSinkTransactions({
        ...sinkOptionsOf(flags),
        ...(flags.all === true ? { all: true } : {}),
        ...(flags.jobStopped === true ? { jobStopped: true } : {}),
        ...(flags.dryRun === true ? { dryRun: true } : {}),
      });
      const verb = result.dryRun ? "would roll back" : "rolled back";
      const gids = result.rolledBack.map((item) => item.gid);
      const tables = result.dropped.map((item) => `${item.schema}.${item.table}`);
      io.stdout(
        `${verb} ${gids.length} prepared transaction(s)${gids.length > 0 ? `: ${gids.join(", ")}` : ""}\n`,
      );
      io.stdout(
        `${result.dryRun ? "would drop" : "dropped"} ${tables.length} staging table(s)${tables.length > 0 ? `: ${tables.join(", ")}` : ""}\n`,
      );
      const kept = result.kept.prepared.length + result.kept.staging.length;
      if (kept > 0) {
        io.stdout(
          `kept ${kept} that a running job or the restore of its latest checkpoint may still commit: ${[
            ...result.kept.prepared.map((item) => item.gid),
            ...result.kept.staging.map((item) => `${item.schema}.${item.table}`),
          ].join(
            ", ",
          )}. A job that will run again cleans them up itself at its next start; for a job stopped for good, add --job-stopped\n`,
        );
      }
    });
  return program;
}

/**
 * Runs `onceflow-postgres` with user arguments and returns the exit code: 0 on success, 1 after
 * printing `error [CODE]: message` on stderr.
 *
 * @example
 * ```ts
 * process.exitCode = await runPostgresCli(process.argv.slice(2), processIo);
 * ```
 */
export async function runPostgresCli(args: readonly string[], io: PostgresCliIo): Promise<number> {
  try {
    await createPostgresCli(io).parseAsync([...args], { from: "user" });
    return 0;
  } catch (error) {
    // Commander already printed its message (or the help).
    if (error instanceof CommanderError) return error.exitCode;
    io.stderr(`${formatError(error)}\n`);
    return 1;
  }
}

function sinkOptionsOf(flags: SinkFlags): PostgresSinkTransactionsOptions {
  return {
    connection: flags.url,
    sinkId: flags.sinkId,
    ...(flags.checkpointBelow === undefined ? {} : { checkpointBelow: flags.checkpointBelow }),
    ...(flags.controlSchema === undefined ? {} : { controlSchema: flags.controlSchema }),
    ...(flags.markerTable === undefined ? {} : { markerTable: flags.markerTable }),
    ...(flags.epochTable === undefined ? {} : { epochTable: flags.epochTable }),
  };
}

function checkpointId(value: string): number {
  const parsed = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(parsed)) {
    throw new ConfigurationError("--checkpoint-below", `must be a whole checkpoint id ≥ 0, got '${value}'`);
  }
  return parsed;
}

/** One line per leftover: what, subtask, epoch, checkpoint or sequence, age, where, superseded. */
function table(found: PostgresSinkTransactions, now: number): string {
  if (found.prepared.length === 0 && found.staging.length === 0) {
    return `nothing prepared or staged for sink ${found.sinkId}\n`;
  }
  const rows = [
    ["kind", "name", "subtask", "epoch", "checkpoint", "age", "database", "superseded"],
    ...found.prepared.map((item) => [
      "prepared",
      item.gid,
      String(item.subtask),
      item.epoch === undefined ? "-" : String(item.epoch),
      String(item.checkpointId),
      `${((now - item.preparedAt) / 1000).toFixed(1)} s`,
      item.database,
      item.superseded ? "yes" : "no",
    ]),
    ...found.staging.map((item) => [
      "staging",
      `${item.schema}.${item.table}`,
      String(item.subtask),
      String(item.epoch),
      "-",
      "-",
      item.database,
      item.superseded ? "yes" : "no",
    ]),
  ];
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return `${rows
    .map((row) =>
      row
        .map((cell, column) => cell.padEnd(widths[column]!))
        .join("  ")
        .trimEnd(),
    )
    .join("\n")}\n`;
}
