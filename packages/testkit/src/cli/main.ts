// `onceflow-testkit prepare [--kafka <versions>]`: fetch the Kafka broker jars into the user cache
// ahead of a test run (CI does this before the tests, so that no test hook waits for Maven).
// `onceflow-testkit kafka|postgres|redis`: start one service until Ctrl-C (see run-service.ts).
import { onceflowCacheDir } from "../runtime/cache-dir.js";
import { ensureKafkaJars } from "../services/kafka/kafka-jars.js";
import { KAFKA_VERSIONS, resolveKafkaVersion } from "../services/kafka/kafka-versions.js";
import { runService, SERVICE_NAMES, type ServiceName } from "./run-service.js";

const USAGE = `usage: onceflow-testkit prepare [--kafka <version>[,<version>…]]
       onceflow-testkit kafka [--version <version>] [--provider environment|testcontainers|local]
       onceflow-testkit postgres [--provider environment|testcontainers|local]
       onceflow-testkit redis [--provider environment|testcontainers|local]

prepare: fetches the Kafka broker jars from Maven Central (with mvn) into ${onceflowCacheDir()}
so that tests using local brokers start without waiting for a download.
Default versions: ${KAFKA_VERSIONS.default} and ${KAFKA_VERSIONS.latest4} (plus $ONCEFLOW_KAFKA_VERSION when set).

kafka, postgres, redis: starts the service as the tests do (the one named by ONCEFLOW_KAFKA_BROKERS,
ONCEFLOW_POSTGRES_URL or ONCEFLOW_REDIS_URL; else a container when Docker answers; else a local
process), prints its address and the environment line for tests and examples
(ONCEFLOW_KAFKA_BROKERS=…, ONCEFLOW_POSTGRES_URL=…, ONCEFLOW_REDIS_URL=…), and stops it on Ctrl-C.`;

function versionsFrom(args: readonly string[]): string[] {
  const index = args.indexOf("--kafka");
  const requested =
    index >= 0
      ? (args[index + 1] ?? "").split(",").filter((v) => v.trim().length > 0)
      : [KAFKA_VERSIONS.default, KAFKA_VERSIONS.latest4, ...(process.env.ONCEFLOW_KAFKA_VERSION ? [""] : [])];
  // "" resolves to $ONCEFLOW_KAFKA_VERSION; aliases ("4") resolve to exact releases.
  return [...new Set(requested.map((version) => resolveKafkaVersion(version || undefined)))];
}

async function prepare(args: readonly string[]): Promise<void> {
  for (const version of versionsFrom(args)) {
    const jars = await ensureKafkaJars(version);
    const how = jars.fetched
      ? `fetched from Maven Central in ${(jars.fetchMs / 1000).toFixed(1)} s`
      : "already cached";
    console.log(`Kafka ${version}: ${how} (${jars.libDir})`);
  }
}

async function main(argv: readonly string[]): Promise<number> {
  const [command, ...args] = argv;
  // Help is asked for anywhere on the line (`prepare --help` too): print it, fetch nothing.
  if (argv.includes("--help") || argv.includes("-h")) {
    console.log(USAGE);
    return 0;
  }
  if (command === "prepare") {
    await prepare(args);
    return 0;
  }
  if ((SERVICE_NAMES as readonly string[]).includes(command ?? "")) {
    return runService(command as ServiceName, args, (line) => console.log(line));
  }
  console.error(USAGE);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    // A client of a stopped service may leave a socket or timer behind: the CLI must still exit.
    setTimeout(() => process.exit(code), 2_000).unref();
  },
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exitCode = 1;
    setTimeout(() => process.exit(1), 2_000).unref();
  },
);
