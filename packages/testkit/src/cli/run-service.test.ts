import { type ChildProcess, spawn } from "node:child_process";
import { Socket } from "node:net";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { redisVersion } from "../services/generic/redis-service.js";
import { loadKafkajs } from "../services/kafka/kafkajs-loader.js";
import { loadPg } from "../services/postgres/pg-loader.js";

// `onceflow-testkit kafka|postgres|redis` as a user runs it: a real process that starts the service
// by the local provider, prints the environment line, serves until SIGINT (Ctrl-C), then stops it.
const cli = fileURLToPath(new URL("./main.ts", import.meta.url));

const children: ChildProcess[] = [];
// A test that failed half way: Ctrl-C first, so that the CLI stops the service it started.
afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode !== null) continue;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGINT");
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    await exited;
    clearTimeout(timer);
  }
});

interface Started {
  readonly child: ChildProcess;
  readonly variables: Record<string, string>;
  readonly output: () => string;
  readonly exited: Promise<number | null>;
}

/** Spawns the CLI and resolves once it printed its environment line. */
async function startCli(service: string): Promise<Started> {
  // Without the addresses of services (a user's or the run's shared ones), so that the chain cannot
  // pick one; the cache and binary locations stay.
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([name]) => !(name.startsWith("ONCEFLOW_TESTKIT_") || /^ONCEFLOW_\w+_(URL|BROKERS)$/.test(name)),
    ),
  );
  const child = spawn(process.execPath, ["--import", "tsx", cli, service, "--provider", "local"], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const output = () => `${stdout}${stderr}`;
  for (;;) {
    const line = stdout.split("\n").find((each) => /^ONCEFLOW_[A-Z_]+=\S+/.test(each));
    if (line !== undefined && stdout.includes("Ctrl-C stops it")) {
      const variables = Object.fromEntries(
        line.split(" ").map((pair) => [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)]),
      );
      return { child, variables, output, exited };
    }
    if (child.exitCode !== null)
      throw new Error(`the CLI exited ${child.exitCode} before it was ready:\n${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Whether something accepts TCP connections at host:port. */
function answers(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
    socket.connect(port, host);
  });
}

/** SIGINT, as Ctrl-C sends it: the CLI says it stopped and exits 0. */
async function interrupt(started: Started, name: string): Promise<void> {
  started.child.kill("SIGINT");
  expect(await started.exited, started.output()).toBe(0);
  expect(started.output()).toContain(`${name} stopped`);
}

describe("onceflow-testkit kafka|postgres|redis", () => {
  it("redis: prints ONCEFLOW_REDIS_URL, serves until Ctrl-C, then is gone", {
    timeout: 120_000,
  }, async () => {
    const started = await startCli("redis");
    expect(started.output()).toMatch(/^Redis \S+ at 127\.0\.0\.1:\d+ \(local\)$/m);
    const url = new URL(started.variables.ONCEFLOW_REDIS_URL ?? "");
    const address = { host: url.hostname, port: Number(url.port) };
    expect(await redisVersion(address)).toMatch(/^\d+\./);
    await interrupt(started, "redis");
    expect(await answers(address.host, address.port)).toBe(false);
  });

  it("postgres: prints ONCEFLOW_POSTGRES_URL, serves until Ctrl-C, then is gone", {
    timeout: 180_000,
  }, async () => {
    const started = await startCli("postgres");
    const connectionString = started.variables.ONCEFLOW_POSTGRES_URL ?? "";
    const pg = await loadPg();
    const client = new pg.Client({ connectionString });
    await client.connect();
    expect((await client.query<{ one: number }>("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
    await client.end();
    await interrupt(started, "postgres");
    const url = new URL(connectionString);
    expect(await answers(url.hostname, Number(url.port))).toBe(false);
  });

  it("kafka: prints ONCEFLOW_KAFKA_BROKERS, serves until Ctrl-C, then is gone", {
    timeout: 300_000,
  }, async () => {
    const started = await startCli("kafka");
    const brokers = (started.variables.ONCEFLOW_KAFKA_BROKERS ?? "").split(",");
    expect(started.variables.ONCEFLOW_KAFKA_VERSION).toMatch(/^\d+\.\d+\.\d+$/);
    const { Kafka, logLevel } = await loadKafkajs();
    const admin = new Kafka({ clientId: "testkit-cli", brokers, logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic: "testkit-cli", numPartitions: 1 }], waitForLeaders: true });
    expect(await admin.listTopics()).toContain("testkit-cli");
    await admin.disconnect();
    await interrupt(started, "kafka");
    const [host, port] = (brokers[0] ?? "").split(":");
    expect(await answers(host ?? "", Number(port))).toBe(false);
  });
});
