/**
 * The Apache Kafka Java client as a test peer: single-file Java programs run with the testkit's
 * cached Kafka jars on the class path (`java -cp '<libs>/*' Program.java …`, Java 11+), so tests
 * check what Kafka's own client writes and reads, on the broker version of the run.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { ensureKafkaJars, resolveKafkaVersion } from "@onceflow/testkit";

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

/** A program of this folder or any `.java` file, by path. */
export function javaProgram(name: string): string {
  return name.endsWith(".java") ? name : fileURLToPath(new URL(`./${name}.java`, import.meta.url));
}

/**
 * Runs a single-file Java program with the Kafka client jars of the run's Kafka version on its class
 * path, `input` on its standard input, and resolves with its standard output; rejects with its
 * standard error when it exits non-zero.
 */
export async function runJavaProgram(
  program: string,
  args: readonly string[],
  options: { input?: string; timeoutMs?: number } = {},
): Promise<string> {
  const { libDir } = await ensureKafkaJars(resolveKafkaVersion());
  return new Promise((resolve, reject) => {
    const child = execFile(
      "java",
      ["-cp", `${libDir}/*`, javaProgram(program), ...args],
      { maxBuffer: 512 * 1024 * 1024, timeout: options.timeoutMs ?? 170_000 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`${program} failed: ${error.message}\n${stderr}`, { cause: error }));
        else resolve(stdout);
      },
    );
    child.stdin?.end(options.input ?? "");
  });
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

/** How fast the Java consumer read `topic` whole: records, key and value bytes, and nanoseconds. */
export async function javaConsumeTimings(
  brokers: readonly string[],
  topic: string,
  settings: JavaSettings = {},
): Promise<{ records: number; bytes: number; nanos: number }> {
  const output = await runJavaProgram("JavaConsumer", [
    brokers.join(","),
    topic,
    "--timings",
    ...settingArgs(settings),
  ]);
  const [timings] = jsonLines<{ records: number; bytes: number; nanos: number }>(output);
  if (timings === undefined) throw new Error(`JavaConsumer printed no timings: ${output}`);
  return timings;
}
