// `onceflow-testkit kafka|postgres|redis`: starts one service by the same provider chain as the
// tests (a named one from the environment, a container when Docker answers, else a local process),
// prints where it is and the environment line that points tests and examples at it, and stops it
// on Ctrl-C (SIGINT) or SIGTERM.
import { redisService } from "../services/generic/redis-service.js";
import { startService } from "../services/generic/start-service.js";
import { KAFKA_BROKERS_VARIABLE } from "../services/kafka/environment-kafka.js";
import { startKafka } from "../services/kafka/start-kafka.js";
import { POSTGRES_URL_VARIABLE } from "../services/postgres/environment-postgres.js";
import { startPostgres } from "../services/postgres/start-postgres.js";
import type { ProviderKind } from "../services/providers/provider-selection.js";

/** The services the CLI starts. */
export const SERVICE_NAMES = ["kafka", "postgres", "redis"] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];

/** A started service as the CLI reports it. */
interface Running {
  readonly description: string;
  /** `NAME=value` pairs: the line a shell or another terminal uses. */
  readonly environment: Readonly<Record<string, string>>;
  readonly provider: ProviderKind;
  stop(): Promise<void>;
}

export interface ServiceFlags {
  readonly provider?: ProviderKind;
  /** Kafka only: the broker version (default `ONCEFLOW_KAFKA_VERSION`, else the testkit's default). */
  readonly version?: string;
}

const PROVIDERS: readonly ProviderKind[] = ["environment", "testcontainers", "local"];

/**
 * Parses `--provider <kind>` and `--version <v>`; throws with the usage's words on anything else.
 */
export function parseServiceFlags(name: ServiceName, args: readonly string[]): ServiceFlags {
  let provider: ProviderKind | undefined;
  let version: string | undefined;
  for (let index = 0; index < args.length; index++) {
    const flag = args[index];
    const value = args[index + 1];
    if (flag === "--provider" && value !== undefined && (PROVIDERS as readonly string[]).includes(value)) {
      provider = value as ProviderKind;
      index++;
    } else if (flag === "--version" && name === "kafka" && value !== undefined) {
      version = value;
      index++;
    } else {
      throw new Error(
        `onceflow-testkit ${name}: unknown or incomplete option ${JSON.stringify(flag)} (--provider ${PROVIDERS.join("|")}${name === "kafka" ? ", --version <kafka version>" : ""})`,
      );
    }
  }
  return { ...(provider === undefined ? {} : { provider }), ...(version === undefined ? {} : { version }) };
}

async function start(name: ServiceName, flags: ServiceFlags): Promise<Running> {
  const provider = flags.provider === undefined ? {} : { provider: flags.provider };
  switch (name) {
    case "kafka": {
      const kafka = await startKafka({
        ...provider,
        ...(flags.version === undefined ? {} : { version: flags.version }),
      });
      return {
        description: `Kafka ${kafka.version} at ${kafka.brokers.join(",")}`,
        environment: {
          [KAFKA_BROKERS_VARIABLE]: kafka.brokers.join(","),
          ...(kafka.version === "unknown" ? {} : { ONCEFLOW_KAFKA_VERSION: kafka.version }),
        },
        provider: kafka.provider,
        stop: () => kafka.stop(),
      };
    }
    case "postgres": {
      const postgres = await startPostgres(provider);
      return {
        description: `PostgreSQL ${postgres.version} at ${postgres.host}:${postgres.port} (max_prepared_transactions=${postgres.maxPreparedTransactions})`,
        environment: { [POSTGRES_URL_VARIABLE]: postgres.connectionString },
        provider: postgres.provider,
        stop: () => postgres.stop(),
      };
    }
    case "redis": {
      const redis = await startService(redisService(), provider);
      return {
        description: `Redis ${redis.version} at ${redis.host}:${redis.port}`,
        environment: { ONCEFLOW_REDIS_URL: redis.url },
        provider: redis.provider,
        stop: () => redis.stop(),
      };
    }
  }
}

/**
 * Starts the service, prints it, and resolves once a signal stopped it (0) — the process stays up
 * in between. A service named by the environment is only checked and printed: nothing was started,
 * so nothing is stopped.
 */
export async function runService(
  name: ServiceName,
  args: readonly string[],
  write: (line: string) => void,
): Promise<number> {
  const flags = parseServiceFlags(name, args);
  const running = await start(name, flags);
  const line = Object.entries(running.environment)
    .map(([variable, value]) => `${variable}=${value}`)
    .join(" ");
  write(`${running.description} (${running.provider})`);
  write(line);
  const started = running.provider !== "environment";
  write(
    started
      ? "Ctrl-C stops it. Point tests and examples at it with the line above, e.g. in another terminal: export " +
          line
      : "It was named by the environment: nothing was started, nothing will be stopped.",
  );
  if (!started) return 0;
  // A daemonized server (pg_ctl) leaves no handle in this process: keep it alive until a signal.
  const keepAlive = setInterval(() => undefined, 1 << 30);
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once("SIGINT", () => resolve("SIGINT"));
    process.once("SIGTERM", () => resolve("SIGTERM"));
  });
  clearInterval(keepAlive);
  write(`${signal}: stopping ${name}`);
  await running.stop();
  write(`${name} stopped`);
  return 0;
}
