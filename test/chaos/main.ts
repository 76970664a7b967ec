// `npm run chaos -- --kills 200 [--seed N] [--records N]`: the long chaos run, by hand.
// `--pipeline kafka-to-kafka|kafka-to-postgres` runs the Kafka chaos instead (brokers from --brokers or
// ONCEFLOW_KAFKA_BROKERS, PostgreSQL from --postgres or ONCEFLOW_POSTGRES_URL).
import { parseArgs } from "node:util";
import { chaosSeed, runGeneratorToFilesChaos } from "./chaos-runner.js";
import { runKafkaChaos } from "./kafka-chaos-runner.js";

const { values } = parseArgs({
  options: {
    pipeline: { type: "string", default: "generator-to-files" },
    kills: { type: "string", default: "200" },
    seed: { type: "string" },
    records: { type: "string" },
    "max-delay": { type: "string" },
    rate: { type: "string" },
    brokers: { type: "string" },
    postgres: { type: "string" },
  },
});
const seed = values.seed === undefined ? chaosSeed() : Number(values.seed);
console.log(
  `chaos seed ${seed} (replay: npm run chaos -- --pipeline ${values.pipeline} --seed ${seed} --kills ${values.kills})`,
);
const log = (line: string) => console.log(line);
try {
  let report: object;
  if (values.pipeline === "generator-to-files") {
    report = await runGeneratorToFilesChaos({
      seed,
      kills: Number(values.kills),
      records: Number(values.records ?? "150000"),
      maxKillDelayMs: Number(values["max-delay"] ?? "1500"),
      recordsPerSecond: Number(values.rate ?? "1000"),
      log,
    });
  } else if (values.pipeline === "kafka-to-kafka" || values.pipeline === "kafka-to-postgres") {
    const brokers = values.brokers ?? process.env.ONCEFLOW_KAFKA_BROKERS;
    const postgresUrl = values.postgres ?? process.env.ONCEFLOW_POSTGRES_URL;
    if (brokers === undefined || brokers === "")
      throw new Error("--brokers or ONCEFLOW_KAFKA_BROKERS is required");
    if (values.pipeline === "kafka-to-postgres" && (postgresUrl === undefined || postgresUrl === ""))
      throw new Error("--postgres or ONCEFLOW_POSTGRES_URL is required");
    const kills = Number(values.kills);
    report = await runKafkaChaos({
      sink: values.pipeline === "kafka-to-kafka" ? "kafka" : "postgres",
      seed,
      kills,
      // Enough input to outlast the kills (about 1.4 s each at the default delays).
      records: Number(values.records ?? String(Math.max(3000, kills * 300))),
      recordsPerSecond: Number(values.rate ?? "200"),
      maxKillDelayMs: Number(values["max-delay"] ?? "2500"),
      brokers: brokers.split(","),
      ...(postgresUrl === undefined ? {} : { postgresUrl }),
      log,
    });
  } else {
    throw new Error(`--pipeline must be generator-to-files, kafka-to-kafka or kafka-to-postgres`);
  }
  console.log(`PASSED ${JSON.stringify(report)}`);
} catch (error) {
  console.error(`FAILED: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
}
