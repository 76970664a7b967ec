// `onceflow-testkit prepare [--kafka <versions>]`: fetch the Kafka broker jars into the user cache
// ahead of a test run (CI does this before the tests, so that no test hook waits for Maven).
import { onceflowCacheDir } from "../runtime/cache-dir.js";
import { ensureKafkaJars } from "../services/kafka/kafka-jars.js";
import { KAFKA_VERSIONS, resolveKafkaVersion } from "../services/kafka/kafka-versions.js";

const USAGE = `usage: onceflow-testkit prepare [--kafka <version>[,<version>…]]

Fetches the Kafka broker jars from Maven Central (with mvn) into ${onceflowCacheDir()}
so that tests using local brokers start without waiting for a download.
Default versions: ${KAFKA_VERSIONS.default} and ${KAFKA_VERSIONS.latest4} (plus $ONCEFLOW_KAFKA_VERSION when set).`;

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
  console.error(USAGE);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exitCode = 1;
  },
);
