import { execFile, spawn } from "node:child_process";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { build } from "esbuild";
import pg from "pg";
import { chaosKafkaClient } from "./chaos-input.js";
import { watchChild } from "./chaos-runner.js";
import {
  type ChaosSignal,
  kafkaChaosJobFixture,
  type SubtaskLauncher,
  subtaskEnvironment,
  watchSubtask,
} from "./subtask-process.js";

// The chaos run's own containers, as a Kubernetes deployment would have them: a user-defined network,
// a KRaft broker and a PostgreSQL on it, and the job as containers of the job image, one per subtask
// (a StatefulSet's pods), started with `docker run`. The chaos acts on them with the engine's own
// tools: `docker kill` (SIGKILL), `docker pause`/`unpause` (a frozen VM), `docker network
// disconnect`/`connect` (a partition). The harness reaches the broker and PostgreSQL only through
// ports published on 127.0.0.1; the job containers reach them by name on the run's network.

const run = promisify(execFile);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The images the run uses; each can be overridden like the testkit's. */
export interface ContainerImages {
  /** `ONCEFLOW_KAFKA_IMAGE` (`{version}` replaced), default `onceflow-test/kafka:<version>`. */
  readonly kafka: string;
  /** `ONCEFLOW_POSTGRES_IMAGE`, default `onceflow-test/postgres:latest`. */
  readonly postgres: string;
  /** `ONCEFLOW_JOB_IMAGE`, default `onceflow-test/job:latest` (examples/kubernetes/Dockerfile). */
  readonly job: string;
}

/** The images from the environment, else the ones `scripts/test-images/build.sh` makes. */
export function containerImagesFromEnvironment(kafkaVersion = "3.9.1"): ContainerImages {
  const variable = (name: string) => {
    const value = process.env[name]?.trim();
    return value === undefined || value === "" ? undefined : value;
  };
  return {
    kafka: (variable("ONCEFLOW_KAFKA_IMAGE") ?? "onceflow-test/kafka:{version}").replaceAll(
      "{version}",
      kafkaVersion,
    ),
    postgres: variable("ONCEFLOW_POSTGRES_IMAGE") ?? "onceflow-test/postgres:latest",
    job: variable("ONCEFLOW_JOB_IMAGE") ?? "onceflow-test/job:latest",
  };
}

/** Runs the docker CLI; rejects with its stderr. */
export async function docker(...args: string[]): Promise<string> {
  try {
    const { stdout } = await run("docker", args, { maxBuffer: 16 * 1024 * 1024 });
    return stdout.trim();
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr?.trim();
    throw new Error(`docker ${args.slice(0, 2).join(" ")} failed: ${stderr || String(error)}`);
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0));
    });
  });
}

/** The single-node settings of the testkit's brokers (its broker-properties), as image variables. */
const brokerSettings: Record<string, string> = {
  KAFKA_NUM_PARTITIONS: "1",
  KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: "1",
  KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS: "1",
  KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: "1",
  KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: "1",
  KAFKA_TRANSACTION_STATE_LOG_NUM_PARTITIONS: "1",
  KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: "0",
  KAFKA_TRANSACTION_MAX_TIMEOUT_MS: "900000",
  KAFKA_TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS: "1000",
  KAFKA_AUTO_CREATE_TOPICS_ENABLE: "false",
  KAFKA_BROKER_SESSION_TIMEOUT_MS: "3000",
  KAFKA_BROKER_HEARTBEAT_INTERVAL_MS: "500",
  KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR: "1",
  KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR: "1",
};

function environmentArguments(env: Readonly<Record<string, string>>): string[] {
  return Object.entries(env).flatMap(([name, value]) => ["-e", `${name}=${value}`]);
}

/** The run's network, services and job containers. */
export interface ContainerPlatform {
  /** For the harness (the producer, the independent reader): `127.0.0.1:<published port>`. */
  readonly brokers: readonly string[];
  readonly postgresUrl: string;
  /** For the job containers: the same services by their names on the run's network. */
  readonly jobBrokers: readonly string[];
  readonly jobPostgresUrl: string;
  /** Starts a subtask as a container of the job image. */
  readonly launch: SubtaskLauncher;
  /** Cuts a container off the run's network (`docker network disconnect`); resolves to its address. */
  disconnect(container: string): Promise<string>;
  /** Connects it again, with the address it had. */
  connect(container: string, address: string): Promise<void>;
  /** `docker kill` of the broker. */
  killBroker(): Promise<void>;
  /** `docker start` of the broker, resolved once it serves again. */
  startBroker(): Promise<void>;
  /** The container name of a subtask launched by `launch` (its `SubtaskProcess.name` carries it). */
  containerOf(name: string): string;
  /** Removes every container, the network and the job bundle. */
  remove(): Promise<void>;
}

export interface ContainerPlatformOptions {
  /** Unique in the run: the network and container names derive from it. */
  readonly name: string;
  readonly images: ContainerImages;
  readonly log: (line: string) => void;
  readonly startTimeoutMs?: number;
}

async function untilKafkaServes(brokers: readonly string[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const admin = chaosKafkaClient(brokers).admin();
    try {
      await admin.connect();
      await admin.listTopics();
      await admin.disconnect();
      return;
    } catch (error) {
      await admin.disconnect().catch(() => undefined);
      if (Date.now() > deadline)
        throw new Error(`the broker did not serve within ${timeoutMs} ms: ${String(error)}`);
      await sleep(500);
    }
  }
}

async function untilPostgresServes(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new pg.Client({ connectionString: url });
    client.on("error", () => undefined);
    try {
      await client.connect();
      await client.query("SELECT 1");
      await client.end();
      return;
    } catch (error) {
      await client.end().catch(() => undefined);
      if (Date.now() > deadline)
        throw new Error(`PostgreSQL did not serve within ${timeoutMs} ms: ${String(error)}`);
      await sleep(500);
    }
  }
}

/**
 * A network with a subnet of its own: a partitioned container is connected again with the address it
 * had (a cable pulled and plugged back, not a move), which the engine allows only on such a network.
 * A /16, so that the engine never hands a freed address to another container within a run.
 */
async function createNetwork(network: string, label: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const subnet = `10.${100 + Math.floor(Math.random() * 150)}.0.0/16`;
    try {
      await docker("network", "create", "--label", label, "--subnet", subnet, network);
      return;
    } catch (error) {
      if (attempt >= 10 || !/overlap/i.test(String(error))) throw error;
    }
  }
}

/** Bundles the chaos job to one ES module that imports the packages the job image has installed. */
async function bundleJob(): Promise<string> {
  const folder = await mkdtemp(join(tmpdir(), "onceflow-chaos-job-"));
  await build({
    entryPoints: [kafkaChaosJobFixture],
    outfile: join(folder, "job.mjs"),
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    logLevel: "error",
  });
  await chmod(folder, 0o755);
  return folder;
}

/**
 * Starts the run's network, broker and PostgreSQL, and bundles the job for its containers.
 *
 * @example
 * ```ts
 * const platform = await startContainerPlatform({ name: "chaos-1", images: containerImagesFromEnvironment(), log: console.log });
 * ```
 */
export async function startContainerPlatform(options: ContainerPlatformOptions): Promise<ContainerPlatform> {
  const { name, images, log } = options;
  const timeout = options.startTimeoutMs ?? 180_000;
  const label = `org.onceflow.chaos=${name}`;
  const network = `${name}-net`;
  const broker = `${name}-kafka`;
  const postgres = `${name}-postgres`;
  const [kafkaPort, postgresPort] = [await freePort(), await freePort()];
  const brokers = [`127.0.0.1:${kafkaPort}`];
  const postgresUrl = `postgres://postgres:chaos@127.0.0.1:${postgresPort}/test`;
  const jobFolder = await bundleJob();
  const remove = async () => {
    const ids = await docker("ps", "-aq", "--filter", `label=${label}`).catch(() => "");
    for (const id of ids.split("\n").filter((line) => line !== "")) {
      // A paused container cannot be removed before it is unpaused.
      await docker("unpause", id).catch(() => undefined);
      await docker("rm", "-f", "-v", id).catch(() => undefined);
    }
    await docker("network", "rm", network).catch(() => undefined);
    await rm(jobFolder, { recursive: true, force: true });
  };
  try {
    await createNetwork(network, label);
    await docker(
      "run",
      "-d",
      "--name",
      broker,
      "--label",
      label,
      "--network",
      network,
      "--network-alias",
      "kafka",
      "-p",
      `127.0.0.1:${kafkaPort}:${kafkaPort}`,
      ...environmentArguments({
        CLUSTER_ID: "b25jZWZsb3ctdGVzdGtpdA",
        KAFKA_HEAP_OPTS: "-Xms128m -Xmx512m",
        KAFKA_NODE_ID: "1",
        KAFKA_PROCESS_ROLES: "broker,controller",
        KAFKA_CONTROLLER_QUORUM_VOTERS: "1@localhost:29093",
        // HOST for the harness through the published port, INTERNAL for the job containers.
        KAFKA_LISTENERS: `HOST://0.0.0.0:${kafkaPort},INTERNAL://0.0.0.0:19092,CONTROLLER://localhost:29093`,
        KAFKA_ADVERTISED_LISTENERS: `HOST://127.0.0.1:${kafkaPort},INTERNAL://kafka:19092`,
        KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: "HOST:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
        KAFKA_CONTROLLER_LISTENER_NAMES: "CONTROLLER",
        KAFKA_INTER_BROKER_LISTENER_NAME: "INTERNAL",
        KAFKA_LOG_DIRS: "/var/lib/kafka/data",
        ...brokerSettings,
      }),
      images.kafka,
    );
    await docker(
      "run",
      "-d",
      "--name",
      postgres,
      "--label",
      label,
      "--network",
      network,
      "--network-alias",
      "postgres",
      "-p",
      `127.0.0.1:${postgresPort}:5432`,
      "-e",
      "POSTGRES_PASSWORD=chaos",
      "-e",
      "POSTGRES_DB=test",
      images.postgres,
      "postgres",
      "-c",
      "max_prepared_transactions=100",
      "-c",
      "max_connections=300",
    );
    await Promise.all([untilKafkaServes(brokers, timeout), untilPostgresServes(postgresUrl, timeout)]);
    log(
      `  containers: broker ${images.kafka} at ${brokers[0]}, ${images.postgres} at 127.0.0.1:${postgresPort}, jobs of ${images.job} on ${network}`,
    );
  } catch (error) {
    const tail = await docker("logs", "--tail", "30", broker).catch(() => "");
    await remove();
    throw new Error(`${error instanceof Error ? error.message : String(error)}\n${tail}`);
  }

  let containers = 0;
  const launch: SubtaskLauncher = (env, subtask, parallelism) => {
    containers += 1;
    const container = `${name}-s${subtask}-${containers}`;
    const args = [
      "run",
      "--rm",
      "--name",
      container,
      "--label",
      label,
      "--network",
      network,
      "-v",
      `${jobFolder}:/app/job:ro`,
      // Filesystem checkpoints: the folder holding them, at the same path (a shared volume).
      ...(env.CHAOS_CHECKPOINT_DIR === undefined
        ? []
        : ["-v", `${dirname(env.CHAOS_CHECKPOINT_DIR)}:${dirname(env.CHAOS_CHECKPOINT_DIR)}`]),
      ...environmentArguments({ ...env, ...subtaskEnvironment(subtask, parallelism) }),
      images.job,
      "node",
      "/app/job/job.mjs",
    ];
    const child = watchChild(spawn("docker", args, { stdio: ["ignore", "pipe", "pipe"] }));
    let exited = false;
    void child.exited.then(() => {
      exited = true;
    });
    const signal = async (sent: ChaosSignal): Promise<void> => {
      const command =
        sent === "SIGSTOP"
          ? ["pause", container]
          : sent === "SIGCONT"
            ? ["unpause", container]
            : ["kill", "-s", sent, container];
      // `docker run` may not have created the container yet: try until it has, or it ended.
      for (let attempt = 0; ; attempt++) {
        try {
          await docker(...command);
          return;
        } catch (error) {
          const message = error instanceof Error ? error.message : String(error);
          if (exited || /is not running|not paused|already paused/i.test(message)) return;
          if (/is paused/i.test(message) && sent !== "SIGSTOP") {
            await docker("unpause", container).catch(() => undefined);
          } else if (!/No such container/i.test(message) || attempt > 300) {
            throw error;
          }
          await sleep(100);
        }
      }
    };
    // `docker run` exits with 128 + the signal that ended the container's process.
    return watchSubtask(
      child,
      subtask,
      parallelism,
      signal,
      { 137: "SIGKILL", 143: "SIGTERM" },
      ` (${container})`,
    );
  };

  return {
    brokers,
    postgresUrl,
    jobBrokers: ["kafka:19092"],
    jobPostgresUrl: "postgres://postgres:chaos@postgres:5432/test",
    launch,
    disconnect: async (container) => {
      const address = await docker(
        "inspect",
        "-f",
        `{{ (index .NetworkSettings.Networks "${network}").IPAddress }}`,
        container,
      );
      await docker("network", "disconnect", network, container);
      return address;
    },
    connect: async (container, address) => {
      await docker("network", "connect", "--ip", address, network, container);
    },
    killBroker: async () => {
      await docker("kill", "-s", "SIGKILL", broker);
    },
    startBroker: async () => {
      await docker("start", broker);
      await untilKafkaServes(brokers, timeout);
    },
    containerOf: (processName) => /\(([^)]+)\)$/.exec(processName)?.[1] ?? processName,
    remove,
  };
}
