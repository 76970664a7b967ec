/**
 * The Apache Kafka Java client as a test peer: small Java programs (this folder's, compiled once and
 * cached, or any single-file program run as `java -cp '<libs>/*' Program.java …`) with the
 * testkit's cached Kafka jars on the class path, so tests check what Kafka's own client writes and
 * reads, on the broker version of the run (ONCEFLOW_KAFKA_VERSION).
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rename, rm } from "node:fs/promises";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ensureKafkaJars, onceflowCacheDir, resolveKafkaVersion } from "@onceflow/testkit";

/** A record as the Java programs take and print it: strings as UTF-8, `null` kept. */
export interface JavaRecord {
  readonly key?: string | null;
  readonly value: string | null;
  readonly partition?: number;
  readonly timestamp?: number;
  /** In order, a name may repeat, a value may be null. */
  readonly headers?: ReadonlyArray<readonly [string, string | null]>;
}

/** A record the Java consumer read. */
export interface JavaConsumedRecord {
  readonly partition: number;
  readonly offset: number;
  readonly timestamp: number;
  readonly key: string | null;
  readonly value: string | null;
  readonly headers: ReadonlyArray<readonly [string, string | null]>;
}

/** Producer or consumer settings by their Java names (`compression.type`, `isolation.level` …). */
export type JavaSettings = Readonly<Record<string, string | number | boolean>>;

const HERE = fileURLToPath(new URL(".", import.meta.url));

/**
 * The programs of this folder compiled for a Kafka version, kept in the onceflow cache under a hash
 * of their sources (compiled again only when one changes): a JVM start and a compilation less per
 * run. Compiled into a fresh folder that is then renamed into place, so that test files running at
 * once never see a half-written one.
 */
const compiled = new Map<string, Promise<string>>();

function compiledPrograms(version: string, libDir: string): Promise<string> {
  let classes = compiled.get(version);
  if (classes === undefined) {
    classes = (async () => {
      const sources = (await readdir(HERE)).filter((name) => name.endsWith(".java")).sort();
      const hash = createHash("sha256");
      for (const name of sources) hash.update(name).update(await readFile(join(HERE, name)));
      const root = join(onceflowCacheDir(), "java-client");
      const target = join(root, `kafka-${version}-${hash.digest("hex").slice(0, 16)}`);
      if (existsSync(target)) return target;
      await mkdir(root, { recursive: true });
      const fresh = await mkdtemp(join(root, "compiling-"));
      await run("javac", ["-cp", `${libDir}/*`, "-d", fresh, ...sources.map((name) => join(HERE, name))]);
      await rename(fresh, target).catch(async (error: unknown) => {
        // Another process put the same classes there first.
        if (!existsSync(target)) throw error;
        await rm(fresh, { recursive: true, force: true });
      });
      return target;
    })();
    compiled.set(version, classes);
  }
  return classes;
}

function run(command: string, args: readonly string[], options: { input?: string; timeoutMs?: number } = {}) {
  return new Promise<string>((resolve, reject) => {
    const child = execFile(
      command,
      args,
      { maxBuffer: 512 * 1024 * 1024, timeout: options.timeoutMs ?? 170_000 },
      (error, stdout, stderr) => {
        if (error)
          reject(
            new Error(`${command} ${args.at(-1)} failed: ${error.message}\n${stderr}`, { cause: error }),
          );
        else resolve(stdout);
      },
    );
    child.stdin?.end(options.input ?? "");
  });
}

/**
 * Runs a Java program with the Kafka client jars of the run's Kafka version on its class path,
 * `input` on its standard input, and resolves with its standard output; rejects with its standard
 * error when it exits non-zero. `program` is one of this folder's (`"JavaProducer"`, compiled once
 * and cached) or a path to a single-file program (`….java`, run from source).
 */
export async function runJavaProgram(
  program: string,
  args: readonly string[],
  options: { input?: string; timeoutMs?: number } = {},
): Promise<string> {
  const version = resolveKafkaVersion();
  const { libDir } = await ensureKafkaJars(version);
  if (program.endsWith(".java")) return run("java", ["-cp", `${libDir}/*`, program, ...args], options);
  const classes = await compiledPrograms(version, libDir);
  return run("java", ["-cp", `${classes}${delimiter}${libDir}/*`, program, ...args], options);
}

const settingArgs = (settings: JavaSettings): string[] =>
  Object.entries(settings).map(([name, value]) => `${name}=${String(value)}`);

const jsonLines = <T>(output: string): T[] =>
  output
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as T);

/**
 * Writes `records` to `topic` with the Java producer and the given settings (a `transactional.id`
 * puts them all in one committed transaction); resolves with where each landed.
 *
 * @example
 * ```ts
 * await javaProduce(kafkaBrokers(), topic, [{ key: "k", value: "v" }], { "compression.type": "zstd" });
 * ```
 */
export async function javaProduce(
  brokers: readonly string[],
  topic: string,
  records: readonly JavaRecord[],
  settings: JavaSettings = {},
): Promise<Array<{ partition: number; offset: number }>> {
  const input = records.map((record) => JSON.stringify(record)).join("\n");
  const output = await runJavaProgram("JavaProducer", [brokers.join(","), topic, ...settingArgs(settings)], {
    input,
  });
  return jsonLines(output);
}

/**
 * Every record of `topic` from the beginning up to its end as of the call, read by the Java consumer
 * with `isolation.level=read_committed` (unless `settings` say otherwise), no consumer group.
 *
 * @example
 * ```ts
 * const records = await javaConsume(kafkaBrokers(), topic);
 * ```
 */
export async function javaConsume(
  brokers: readonly string[],
  topic: string,
  settings: JavaSettings = {},
): Promise<JavaConsumedRecord[]> {
  const output = await runJavaProgram("JavaConsumer", [brokers.join(","), topic, ...settingArgs(settings)]);
  return jsonLines(output);
}

/**
 * The size of `topic`'s log on the brokers (every partition and replica), from the Java
 * AdminClient's describeLogDirs: what its records take as stored, compressed or not.
 */
export async function javaTopicBytes(brokers: readonly string[], topic: string): Promise<number> {
  const output = await runJavaProgram("JavaTopicBytes", [brokers.join(","), topic]);
  const [size] = jsonLines<{ bytes: number }>(output);
  if (size === undefined) throw new Error(`JavaTopicBytes printed no size: ${output}`);
  return size.bytes;
}

/**
 * How fast the Java consumer read `topic` whole: records, key and value bytes, and nanoseconds from
 * its first records to the end, for each of `passes` reads in one JVM (the later ones warm).
 */
export async function javaConsumeTimings(
  brokers: readonly string[],
  topic: string,
  options: { passes?: number; settings?: JavaSettings } = {},
): Promise<Array<{ records: number; bytes: number; nanos: number }>> {
  const output = await runJavaProgram(
    "JavaConsumer",
    [
      brokers.join(","),
      topic,
      "--timings",
      `--passes=${options.passes ?? 1}`,
      ...settingArgs(options.settings ?? {}),
    ],
    { timeoutMs: 900_000 },
  );
  const timings = jsonLines<{ records: number; bytes: number; nanos: number }>(output);
  if (timings.length === 0) throw new Error(`JavaConsumer printed no timings: ${output}`);
  return timings;
}
