import { ConfigurationError, formatError } from "@onceflow/core";
import { Command, CommanderError } from "commander";
import {
  abortKafkaTransactions,
  type KafkaTransactionInfo,
  listKafkaTransactions,
} from "../admin/kafka-transactions.js";

/**
 * Where the CLI writes. `main.ts` passes the process's streams; tests capture the text.
 *
 * @example
 * ```ts
 * const lines: string[] = [];
 * const io: KafkaCliIo = { stdout: (text) => lines.push(text), stderr: (text) => lines.push(text) };
 * ```
 */
export interface KafkaCliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
}

interface ConnectionFlags {
  readonly brokers: string;
  readonly prefix?: string;
  readonly olderThan?: number;
}

/**
 * Builds the `onceflow-kafka` program: `transactions list` and `transactions abort`, for the
 * lingering transactions that hold `read_committed` consumers at the last stable offset. It never
 * exits the process; {@link runKafkaCli} turns errors into an exit code.
 *
 * @example
 * ```ts
 * await createKafkaCli(io).parseAsync(["transactions", "list", "--brokers", "localhost:9092"], { from: "user" });
 * ```
 */
export function createKafkaCli(io: KafkaCliIo): Command {
  const program = new Command("onceflow-kafka")
    .description("onceflow's Kafka tools")
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
    .description("find and abort lingering transactions (Kafka 3.0+: ListTransactions, KIP-664)");

  transactions
    .command("list")
    .description(
      "list transactions (every state), or with --older-than only the open ones that began longer ago",
    )
    .requiredOption("--brokers <list>", "comma-separated bootstrap brokers, e.g. localhost:9092")
    .option("--prefix <prefix>", PREFIX_HELP)
    .option("--older-than <ms>", "only transactions open for more than this many ms", milliseconds)
    .option("--json", "print JSON instead of a table")
    .action(async (flags: ConnectionFlags & { json?: boolean }) => {
      const brokers = brokerList(flags.brokers);
      const found = await listKafkaTransactions({
        brokers,
        ...(flags.prefix === undefined ? {} : { prefix: flags.prefix }),
        ...(flags.olderThan === undefined ? {} : { olderThanMs: flags.olderThan }),
      });
      if (found.length === 0 && flags.prefix !== undefined) await requireKnownPrefix(brokers, flags.prefix);
      io.stdout(flags.json === true ? `${JSON.stringify(found, null, 2)}\n` : table(found, Date.now()));
    });

  transactions
    .command("abort")
    .description(
      "abort (fence) the open transactions of the given ids, or of every id with --prefix open for more than --older-than ms",
    )
    .requiredOption("--brokers <list>", "comma-separated bootstrap brokers, e.g. localhost:9092")
    .option("--id <ids...>", "transactional ids to abort")
    .option("--prefix <prefix>", `with --older-than: every id of this prefix. ${PREFIX_HELP}`)
    .option(
      "--older-than <ms>",
      "with --prefix: only transactions open for more than this many ms",
      milliseconds,
    )
    .option("--dry-run", "print what would be aborted, abort nothing")
    .action(async (flags: ConnectionFlags & { id?: string[]; dryRun?: boolean }) => {
      const brokers = brokerList(flags.brokers);
      let ids: string[];
      if (flags.id !== undefined && flags.id.length > 0) {
        if (flags.prefix !== undefined)
          throw new ConfigurationError("--id", "give either --id or --prefix with --older-than, not both");
        ids = flags.id;
      } else if (flags.prefix !== undefined && flags.olderThan !== undefined) {
        const lingering = await listKafkaTransactions({
          brokers,
          prefix: flags.prefix,
          olderThanMs: flags.olderThan,
        });
        ids = lingering.map((transaction) => transaction.transactionalId);
        if (ids.length === 0) await requireKnownPrefix(brokers, flags.prefix);
      } else {
        throw new ConfigurationError(
          "--id",
          "say what to abort: --id <ids...>, or --prefix <prefix> with --older-than <ms> (the age keeps a running job's young transactions out)",
        );
      }
      if (ids.length === 0) {
        io.stdout("no open transaction to abort\n");
        return;
      }
      if (flags.dryRun === true) {
        io.stdout(`would abort ${ids.length}: ${ids.join(", ")}\n`);
        return;
      }
      await abortKafkaTransactions({ brokers, transactionalIds: ids });
      io.stdout(`aborted ${ids.length}: ${ids.join(", ")}\n`);
    });
  return program;
}

/**
 * Runs `onceflow-kafka` with user arguments and returns the exit code: 0 on success, 1 after
 * printing `error [CODE]: message` on stderr.
 *
 * @example
 * ```ts
 * process.exitCode = await runKafkaCli(process.argv.slice(2), processIo);
 * ```
 */
export async function runKafkaCli(args: readonly string[], io: KafkaCliIo): Promise<number> {
  try {
    await createKafkaCli(io).parseAsync([...args], { from: "user" });
    return 0;
  } catch (error) {
    // Commander already printed its message (or the help).
    if (error instanceof CommanderError) return error.exitCode;
    io.stderr(`${formatError(error)}\n`);
    return 1;
  }
}

const PREFIX_HELP =
  "only ids starting with this: a KafkaSink's transactionalIdPrefix (its ids are <prefix>-<subtask>-<incarnation>-<slot>); a prefix of no id the brokers know is an error listing the prefixes they do know";

/**
 * A prefix that no transactional id the brokers know starts with is a wrong prefix, not an
 * all-clear: throws a `CONFIGURATION` error listing the prefixes of the ids they do know.
 */
async function requireKnownPrefix(brokers: readonly string[], prefix: string): Promise<void> {
  const known = await listKafkaTransactions({ brokers: [...brokers] });
  if (known.some((transaction) => transaction.transactionalId.startsWith(prefix))) return;
  // A KafkaSink's ids end in exactly three numbers, -<subtask>-<incarnation>-<slot> (a prefix may end in
  // digits of its own), its claim of the prefix in
  // -claim.<jobId>: what comes before is its prefix. The prefixes nearest the one given come first,
  // so a typo's intended prefix is shown however many others the brokers know.
  const prefixes = [
    ...new Set(
      known.map((transaction) =>
        transaction.transactionalId.replace(/-claim\..*$/s, "").replace(/(-\d+){3}$/, ""),
      ),
    ),
  ].sort((a, b) => commonStartLength(b, prefix) - commonStartLength(a, prefix) || a.localeCompare(b));
  const shown =
    prefixes.slice(0, 30).join(", ") + (prefixes.length > 30 ? ` … (${prefixes.length - 30} more)` : "");
  throw new ConfigurationError(
    "--prefix",
    `no transactional id the brokers know starts with "${prefix}", so nothing can be said about its transactions; ${
      prefixes.length === 0
        ? "the brokers know no transactional id at all (ids expire after transactional.id.expiration.ms, 7 days by default)"
        : `the prefixes they know are ${shown}`
    }. A KafkaSink's prefix is its transactionalIdPrefix option`,
  );
}

function commonStartLength(a: string, b: string): number {
  let length = 0;
  while (length < a.length && length < b.length && a[length] === b[length]) length++;
  return length;
}

function milliseconds(value: string): number {
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed < 0) {
    throw new ConfigurationError("--older-than", `must be a number of milliseconds ≥ 0, got '${value}'`);
  }
  return parsed;
}

function brokerList(value: string): string[] {
  const brokers = value
    .split(",")
    .map((broker) => broker.trim())
    .filter((broker) => broker.length > 0);
  if (brokers.length === 0) throw new ConfigurationError("--brokers", "give at least one host:port");
  return brokers;
}

/** One line per transaction: id, state, how long it has been open, its timeout, its partitions. */
function table(found: readonly KafkaTransactionInfo[], now: number): string {
  if (found.length === 0) return "no transaction found\n";
  const rows = [
    ["transactional id", "state", "open for", "timeout", "partitions"],
    ...found.map((transaction) => [
      transaction.transactionalId,
      transaction.state,
      transaction.startedAt === undefined ? "-" : seconds(now - transaction.startedAt),
      seconds(transaction.timeoutMs),
      transaction.topics.map(({ topic, partitions }) => `${topic}[${partitions.join(",")}]`).join(" ") || "-",
    ]),
  ];
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return (
    rows
      .map((row) =>
        row
          .map((cell, column) => cell.padEnd(widths[column]!))
          .join("  ")
          .trimEnd(),
      )
      .join("\n") + "\n"
  );
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}
