import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, openSync, writeSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serviceUnavailable } from "../../errors/service-errors.js";
import { type CleanupHandle, registerCleanup } from "../../runtime/cleanup-registry.js";
import { findFreePorts } from "../../runtime/free-port.js";
import { readLogTail } from "../../runtime/log-tail.js";
import { outputTail, runCommand, terminateChild, waitForExit } from "../../runtime/processes.js";
import type { ProbeResult } from "../providers/provider-selection.js";
import { brokerLogging, brokerProperties, SASL_PLAIN_USER } from "./broker-properties.js";
import { findJava, type JavaRuntime } from "./java-runtime.js";
import { type CreateTopicOptions, createKafkaTopic, waitUntilKafkaServes } from "./kafka-admin.js";
import { ensureKafkaJars, hasCachedKafkaJars, mavenCommand } from "./kafka-jars.js";
import type { KafkaService } from "./kafka-service.js";
import { minimumJavaFor } from "./kafka-versions.js";

const HOST = "127.0.0.1";
// Small heap: a test broker holds little, and the machine runs the tests next to it.
const JVM_OPTIONS = [
  "-Xms128m",
  "-Xmx512m",
  "-XX:+UseG1GC",
  "-XX:MaxGCPauseMillis=20",
  "-XX:+ExitOnOutOfMemoryError",
  "-Djava.awt.headless=true",
];

/**
 * What a local broker needs that the probe found.
 *
 * @example
 * ```ts
 * const { requirements } = await probeLocalKafka("3.9.1", cacheDir);
 * requirements?.java.version; // "17.0.15"
 * ```
 */
export interface LocalKafkaRequirements {
  java: JavaRuntime;
  /** Whether the jars are cached already (then Maven is not needed). */
  cached: boolean;
  maven?: string;
}

/**
 * Checks that this machine can run a broker of `version` from Maven Central jars: Java (17 for 4.x),
 * and Maven unless the jars are cached already.
 *
 * @example
 * ```ts
 * const { probe } = await probeLocalKafka("3.9.1", cacheDir);
 * ```
 */
export async function probeLocalKafka(
  version: string,
  cacheDir: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ probe: ProbeResult; requirements?: LocalKafkaRequirements }> {
  const needJava = minimumJavaFor(version);
  const remedy =
    `install Java ${needJava}+ and Maven 3.6+ (Debian/Ubuntu: apt-get install openjdk-17-jre-headless maven; ` +
    "or set JAVA_HOME / ONCEFLOW_MAVEN); the broker jars are then fetched from Maven Central once and cached";
  const fail = (detail: string) => ({
    probe: { provider: "local" as const, available: false, detail, remedy },
  });
  const java = await findJava(env);
  if ("problem" in java) return fail(java.problem);
  if (java.major < needJava)
    return fail(`Kafka ${version} needs Java ${needJava}+, found ${java.version} (${java.command})`);
  const cached = await hasCachedKafkaJars(version, cacheDir);
  if (cached) {
    return {
      probe: {
        provider: "local",
        available: true,
        detail: `Java ${java.version}, Kafka ${version} jars cached`,
        remedy,
      },
      requirements: { java, cached },
    };
  }
  const maven = mavenCommand(env);
  try {
    const result = await runCommand(maven, ["-v"], { timeoutMs: 60_000, env });
    const line = result.stdout.split("\n").find((l) => l.includes("Apache Maven")) ?? "";
    if (result.code !== 0) return fail(`"${maven} -v" exited with ${result.code}`);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: strips Maven's ANSI colour codes
    const mavenVersion = line.replace(/\u001b\[[0-9;]*m/g, "").trim();
    return {
      probe: {
        provider: "local",
        available: true,
        detail: `Java ${java.version}, ${mavenVersion} (Kafka ${version} jars to fetch)`,
        remedy,
      },
      requirements: { java, cached, maven },
    };
  } catch (error) {
    return fail(
      `Java ${java.version} found, but the Kafka ${version} jars are not cached and Maven ("${maven}") ` +
        `is missing (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
    );
  }
}

/**
 * Options of {@link startLocalKafka}.
 *
 * @example
 * ```ts
 * const options: LocalKafkaOptions = { version: "3.9.1", java, cacheDir, startTimeoutMs: 180_000 };
 * ```
 */
export interface LocalKafkaOptions {
  version: string;
  java: JavaRuntime;
  cacheDir: string;
  startTimeoutMs: number;
  /** Also a SASL_PLAINTEXT listener (mechanism PLAIN). */
  saslPlain?: boolean;
}

/**
 * Starts a single-node KRaft broker as a local JVM from the cached Maven Central jars (fetching them
 * first when needed), in a fresh temporary folder, on free ports.
 *
 * @example
 * ```ts
 * const kafka = await startLocalKafka({ version: "3.9.1", java, cacheDir, startTimeoutMs: 180_000 });
 * ```
 */
export async function startLocalKafka(
  options: LocalKafkaOptions,
): Promise<KafkaService & { fetchMs: number }> {
  const jars = await ensureKafkaJars(options.version, { cacheDir: options.cacheDir });
  const broker = new LocalKafkaBroker(options, jars.libDir);
  await broker.initialize();
  try {
    await broker.startFirstTime();
  } catch (error) {
    await broker.stop();
    throw error;
  }
  return Object.assign(broker.asService(), { fetchMs: jars.fetchMs });
}

class LocalKafkaBroker {
  private workDir = "";
  private port = 0;
  private controllerPort = 0;
  private saslPort: number | undefined;
  private child: ChildProcess | undefined;
  private cleanup: CleanupHandle | undefined;
  private stopped = false;

  constructor(
    private readonly options: LocalKafkaOptions,
    private readonly libDir: string,
  ) {}

  private get brokers(): string[] {
    return [`${HOST}:${this.port}`];
  }

  private get logPath(): string {
    return join(this.workDir, "broker.log");
  }

  private javaArgs(logging: { systemProperty: string }, mainClass: string, ...rest: string[]): string[] {
    return [...JVM_OPTIONS, logging.systemProperty, "-cp", `${this.libDir}/*`, mainClass, ...rest];
  }

  /** Picks free ports and writes them into server.properties (before the first start only). */
  async choosePorts(): Promise<void> {
    const sasl = this.options.saslPlain === true;
    const ports = (await findFreePorts(sasl ? 3 : 2, HOST)) as [number, number, number?];
    [this.port, this.controllerPort, this.saslPort] = ports;
    const properties = brokerProperties(this.options.version, {
      host: HOST,
      port: this.port,
      controllerPort: this.controllerPort,
      logDir: join(this.workDir, "data"),
      ...(this.saslPort === undefined ? {} : { saslPort: this.saslPort }),
    });
    await writeFile(join(this.workDir, "server.properties"), properties);
  }

  /**
   * The first start. A port found free can be taken by another process before the JVM binds it;
   * then the broker gets new ports once. (Later starts must keep the ports: clients know them.)
   */
  async startFirstTime(): Promise<void> {
    try {
      await this.start();
    } catch (error) {
      if (!/BindException|Address already in use/.test(await readLogTail(this.logPath, 200))) throw error;
      await this.choosePorts();
      await this.start();
    }
  }

  /** Writes the configuration and formats the storage, once per broker. */
  async initialize(): Promise<void> {
    const { version } = this.options;
    this.workDir = await mkdtemp(join(tmpdir(), "onceflow-kafka-"));
    this.cleanup = registerCleanup("kafka", { commands: [], pids: [], dirs: [this.workDir] });
    const logging = brokerLogging(version, this.workDir);
    await writeFile(join(this.workDir, logging.fileName), logging.content);
    await this.choosePorts();
    const clusterId = newKafkaClusterId();
    const format = await runCommand(
      this.options.java.command,
      this.javaArgs(
        logging,
        "kafka.tools.StorageTool",
        "format",
        "-t",
        clusterId,
        "-c",
        join(this.workDir, "server.properties"),
        "--ignore-formatted",
      ),
      { timeoutMs: 120_000, cwd: this.workDir },
    );
    if (format.code !== 0) {
      await this.stop();
      throw serviceUnavailable(
        `Kafka ${version}: formatting the KRaft storage failed (exit ${format.code ?? format.signal}):\n` +
          outputTail(`${format.stdout}${format.stderr}`),
        { version },
      );
    }
  }

  /** Starts the JVM on the existing data and waits until an admin client can describe the cluster. */
  async start(): Promise<void> {
    if (this.stopped) throw serviceUnavailable("Kafka start(): this broker was stopped and its data deleted");
    if (this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null) return;
    const logging = brokerLogging(this.options.version, this.workDir);
    // The JVM writes to a file, not to a pipe of ours: it must not depend on this process to drain it.
    const log = openSync(this.logPath, "a");
    writeSync(
      log,
      `\n===== onceflow testkit: starting Kafka ${this.options.version} at ${new Date().toISOString()}\n`,
    );
    const started = Date.now();
    let child: ChildProcess;
    try {
      child = spawn(
        this.options.java.command,
        this.javaArgs(logging, "kafka.Kafka", join(this.workDir, "server.properties")),
        { cwd: this.workDir, stdio: ["ignore", log, log] },
      );
    } finally {
      closeSync(log);
    }
    const spawnError = new Promise<Error>((resolve) => child.once("error", resolve));
    this.child = child;
    this.cleanup?.update({
      commands: [],
      pids: child.pid === undefined ? [] : [child.pid],
      dirs: [this.workDir],
    });
    const problem = await Promise.race([
      waitUntilKafkaServes(
        this.brokers,
        this.options.startTimeoutMs,
        () => child.exitCode === null && child.signalCode === null,
      ),
      spawnError.then((error) => `java could not be started: ${error.message}`),
    ]);
    if (problem !== undefined) {
      await terminateChild(child, 5_000);
      throw serviceUnavailable(
        `Kafka ${this.options.version} at ${this.brokers[0]} did not serve after ${Date.now() - started} ms: ` +
          `${problem}\n--- broker log tail (${this.logPath}) ---\n${await readLogTail(this.logPath)}`,
        { version: this.options.version, brokers: this.brokers },
      );
    }
  }

  /** SIGKILL: the crash a fault-injection test wants. The data folder stays for start(). */
  async kill(): Promise<void> {
    const child = this.child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGKILL");
    await waitForExit(child, 30_000);
    // The pid is free for reuse now: the crash cleanup must not kill whoever gets it next.
    this.cleanup?.update({ commands: [], pids: [], dirs: [this.workDir] });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.child !== undefined) await terminateChild(this.child, 20_000);
    if (this.workDir !== "") await rm(this.workDir, { recursive: true, force: true });
    this.cleanup?.release();
  }

  asService(): KafkaService {
    // The getters below read the live state (the process id changes on restart).
    const broker = this;
    return {
      brokers: this.brokers,
      version: this.options.version,
      provider: "local",
      get pid() {
        return broker.child?.pid;
      },
      workDir: this.workDir,
      sasl:
        this.saslPort === undefined
          ? undefined
          : { brokers: [`${HOST}:${this.saslPort}`], mechanism: "plain", ...SASL_PLAIN_USER },
      createTopic: (name: string, options: CreateTopicOptions) =>
        createKafkaTopic(this.brokers, name, options),
      kill: () => this.kill(),
      start: () => this.start(),
      stop: () => this.stop(),
    };
  }
}

/**
 * A random KRaft cluster id: 16 random bytes in URL-safe base64 (22 characters), as Kafka's
 * `Uuid.randomUuid()` makes them. Like Kafka, it redraws an id that starts with "-", because the
 * storage tool's argument parser would read it as an option (this failed a CI run once).
 *
 * @example
 * newKafkaClusterId(); // "q1V7a0cRQ0yJ6qSx3Wm3Jg"
 */
export function newKafkaClusterId(random: (size: number) => Buffer = randomBytes): string {
  for (;;) {
    const id = random(16).toString("base64url");
    if (!id.startsWith("-")) return id;
  }
}
