// `npm run chaos -- --kills 200 [--seed N] [--records N]`: the long chaos run, by hand.
// `--pipeline kafka-to-kafka|kafka-to-postgres` runs the Kafka chaos instead (brokers from --brokers or
// ONCEFLOW_KAFKA_BROKERS, PostgreSQL from --postgres or ONCEFLOW_POSTGRES_URL).
// `--topology per-subtask` runs one process per subtask instead, rescaled P → Q → P, with zombies
// (`--zombies N`, default kills/10), checkpoints in `--storage filesystem|postgres`, and a share of
// processes storing one checkpoint after its timeout (`--slow-stores 0.2`).
// `--pipeline keyed-to-kafka|keyed-to-postgres` runs the keyed windowed count (keyBy → tumbling
// window count), rescaled 2 → 3 → 1 (`--parallelisms`) with kills at sink phases, its counts checked
// against the input's; `--topology` is one of its shapes (keyed-chaos-runner.ts): one-process, threads,
// or per-subtask (one process per subtask, the keyBy through a Kafka repartition topic, with kills of
// single processes and zombies besides; `--kills` counts the processes SIGKILLed).
// `--pipeline outbox-to-kafka|changes-to-postgres` runs the change data capture chaos on a throwaway
// PostgreSQL with wal_level=logical that it crashes (`--restarts N`) and with zombies (`--zombies N`),
// both default kills/20; Kafka from --brokers or ONCEFLOW_KAFKA_BROKERS, else one started for the run.
// `--platform containers` (with `--topology per-subtask`) runs each subtask as a container of the job
// image against a broker and a PostgreSQL in containers of the run's own, with `docker kill`,
// `docker pause`, network partitions (`--partitions N`, default kills/20) and broker kills
// (`--broker-kills N`, default kills/40): images from `scripts/test-images/build.sh`, or
// ONCEFLOW_KAFKA_IMAGE / ONCEFLOW_POSTGRES_IMAGE / ONCEFLOW_JOB_IMAGE.
import { parseArgs } from "node:util";
import { startKafka, startPostgres } from "@onceflow/testkit";
import { chaosSeed, runGeneratorToFilesChaos } from "./chaos-runner.js";
import {
  type ContainerPlatform,
  containerImagesFromEnvironment,
  startContainerPlatform,
} from "./container-platform.js";
import { runKafkaChaos } from "./kafka-chaos-runner.js";
import { isKeyedChaosShape, KEYED_CHAOS_SHAPES, runKeyedChaos } from "./keyed-chaos-runner.js";
import { runPerSubtaskChaos } from "./per-subtask-chaos-runner.js";
import { runPostgresChangesChaos } from "./postgres-changes-chaos-runner.js";

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
    topology: { type: "string", default: "one-process" },
    storage: { type: "string", default: "filesystem" },
    zombies: { type: "string" },
    parallelisms: { type: "string" },
    "slow-stores": { type: "string" },
    restarts: { type: "string" },
    platform: { type: "string", default: "processes" },
    partitions: { type: "string" },
    "broker-kills": { type: "string" },
    "kafka-version": { type: "string", default: "3.9.1" },
  },
});
const seed = values.seed === undefined ? chaosSeed() : Number(values.seed);
const keyed = values.pipeline === "keyed-to-kafka" || values.pipeline === "keyed-to-postgres";
const inContainers = values.platform === "containers";
const perSubtask = (values.topology === "per-subtask" || inContainers) && !keyed;
const replayOptions = [
  `--pipeline ${values.pipeline}`,
  ...(perSubtask ? [`--topology per-subtask --storage ${values.storage}`] : []),
  ...(keyed ? [`--topology ${values.topology}`] : []),
  ...(inContainers ? ["--platform containers"] : []),
  ...(values.partitions === undefined ? [] : [`--partitions ${values.partitions}`]),
  ...(values["broker-kills"] === undefined ? [] : [`--broker-kills ${values["broker-kills"]}`]),
  ...(values.zombies === undefined ? [] : [`--zombies ${values.zombies}`]),
  ...(values.parallelisms === undefined ? [] : [`--parallelisms ${values.parallelisms}`]),
  ...(values.records === undefined ? [] : [`--records ${values.records}`]),
  ...(values.rate === undefined ? [] : [`--rate ${values.rate}`]),
  ...(values["max-delay"] === undefined ? [] : [`--max-delay ${values["max-delay"]}`]),
  ...(values["slow-stores"] === undefined ? [] : [`--slow-stores ${values["slow-stores"]}`]),
  ...(values.restarts === undefined ? [] : [`--restarts ${values.restarts}`]),
  `--seed ${seed} --kills ${values.kills}`,
];
console.log(`chaos seed ${seed} (replay: npm run chaos -- ${replayOptions.join(" ")})`);
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
  } else if (values.pipeline === "outbox-to-kafka" || values.pipeline === "changes-to-postgres") {
    report = await runChangeDataCapture(values.pipeline);
  } else if (inContainers) {
    report = await runInContainers();
  } else if (perSubtask) {
    report = await runPerSubtask();
  } else if (keyed) {
    report = await runKeyed();
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
    throw new Error(
      "--pipeline must be generator-to-files, kafka-to-kafka, kafka-to-postgres, keyed-to-kafka, keyed-to-postgres, outbox-to-kafka or changes-to-postgres",
    );
  }
  const violations = (report as { violations?: readonly string[] }).violations ?? [];
  if (violations.length > 0) throw new Error(`${JSON.stringify(report)}\n${violations.join("\n")}`);
  console.log(`PASSED ${JSON.stringify(report)}`);
} catch (error) {
  console.error(`FAILED: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
}

/** The per-subtask chaos with every subtask, the broker and PostgreSQL in containers of the run's own. */
async function runInContainers(): Promise<object> {
  if (values.pipeline !== "kafka-to-kafka" && values.pipeline !== "kafka-to-postgres")
    throw new Error("--platform containers needs --pipeline kafka-to-kafka or kafka-to-postgres");
  const platform = await startContainerPlatform({
    name: `onceflow-chaos-${seed}-${Date.now().toString(36)}`,
    images: containerImagesFromEnvironment(values["kafka-version"]),
    log,
  });
  try {
    return await runPerSubtask(platform);
  } finally {
    await platform.remove();
  }
}

async function runPerSubtask(containers?: ContainerPlatform): Promise<object> {
  const brokers = containers?.brokers.join(",") ?? values.brokers ?? process.env.ONCEFLOW_KAFKA_BROKERS;
  const postgresUrl = containers?.postgresUrl ?? values.postgres ?? process.env.ONCEFLOW_POSTGRES_URL;
  if (brokers === undefined || brokers === "")
    throw new Error("--brokers or ONCEFLOW_KAFKA_BROKERS is required");
  if (values.pipeline !== "kafka-to-kafka" && values.pipeline !== "kafka-to-postgres")
    throw new Error("--topology per-subtask needs --pipeline kafka-to-kafka or kafka-to-postgres");
  if (values.storage !== "filesystem" && values.storage !== "postgres")
    throw new Error("--storage must be filesystem or postgres");
  const kills = Number(values.kills);
  const zombies = Number(values.zombies ?? String(Math.max(3, Math.round(kills / 10))));
  const networkPartitions = containers
    ? Number(values.partitions ?? String(Math.max(1, Math.round(kills / 20))))
    : 0;
  const brokerKills = containers
    ? Number(values["broker-kills"] ?? String(Math.max(1, Math.round(kills / 40))))
    : 0;
  return runPerSubtaskChaos({
    sink: values.pipeline === "kafka-to-kafka" ? "kafka" : "postgres",
    storage: values.storage,
    seed,
    kills,
    zombies,
    // About 4 s of input per event at 150/s (most events wait for a process to be ready), so that
    // records flow through the whole schedule.
    records: Number(
      values.records ??
        String(Math.max(3000, (kills + zombies * 2 + networkPartitions * 2 + brokerKills * 10) * 600)),
    ),
    recordsPerSecond: Number(values.rate ?? "150"),
    ...(values["max-delay"] === undefined ? {} : { maxEventGapMs: Number(values["max-delay"]) }),
    ...(values["slow-stores"] === undefined ? {} : { slowStoreChance: Number(values["slow-stores"]) }),
    ...(values.parallelisms === undefined
      ? {}
      : { parallelisms: values.parallelisms.split(",").map((parallelism) => Number(parallelism)) }),
    brokers: brokers.split(","),
    ...(postgresUrl === undefined || postgresUrl === "" ? {} : { postgresUrl }),
    ...(containers ? { containers, networkPartitions, brokerKills } : {}),
    log,
  });
}

async function runKeyed(): Promise<object> {
  const brokers = values.brokers ?? process.env.ONCEFLOW_KAFKA_BROKERS;
  const postgresUrl = values.postgres ?? process.env.ONCEFLOW_POSTGRES_URL;
  if (brokers === undefined || brokers === "")
    throw new Error("--brokers or ONCEFLOW_KAFKA_BROKERS is required");
  const sink = values.pipeline === "keyed-to-kafka" ? "kafka" : "postgres";
  if (sink === "postgres" && (postgresUrl === undefined || postgresUrl === ""))
    throw new Error("--postgres or ONCEFLOW_POSTGRES_URL is required");
  const shape = values.topology;
  if (!isKeyedChaosShape(shape))
    throw new Error(
      `--topology for a keyed pipeline is one of: ${Object.keys(KEYED_CHAOS_SHAPES).join(", ")}`,
    );
  const kills = Number(values.kills);
  return runKeyedChaos({
    shape,
    sink,
    seed,
    kills,
    // Enough input to outlast the kills (about 3 s each: a start, then the delay or the phase).
    records: Number(values.records ?? String(Math.max(3000, kills * 600))),
    recordsPerSecond: Number(values.rate ?? "200"),
    maxKillDelayMs: Number(values["max-delay"] ?? "2500"),
    ...(values.parallelisms === undefined
      ? {}
      : { parallelisms: values.parallelisms.split(",").map((parallelism) => Number(parallelism)) }),
    brokers: brokers.split(","),
    ...(postgresUrl === undefined || postgresUrl === "" ? {} : { postgresUrl }),
    log,
  });
}

async function runChangeDataCapture(pipeline: "outbox-to-kafka" | "changes-to-postgres"): Promise<object> {
  const postgres = await startPostgres({ walLevel: "logical", provider: "local", faultInjection: true });
  const given = values.brokers ?? process.env.ONCEFLOW_KAFKA_BROKERS;
  const kafka =
    pipeline === "outbox-to-kafka" && (given === undefined || given === "") ? await startKafka() : undefined;
  try {
    return await runPostgresChangesChaos({
      pipeline,
      seed,
      kills: Number(values.kills),
      ...(values.restarts === undefined ? {} : { restarts: Number(values.restarts) }),
      ...(values.zombies === undefined ? {} : { zombies: Number(values.zombies) }),
      ...(values["max-delay"] === undefined ? {} : { maxKillDelayMs: Number(values["max-delay"]) }),
      postgres,
      brokers: kafka?.brokers ?? (given ?? "").split(",").filter((broker) => broker !== ""),
      log,
    });
  } finally {
    await kafka?.stop();
    await postgres.stop();
  }
}
