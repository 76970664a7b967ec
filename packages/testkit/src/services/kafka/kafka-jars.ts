import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { serviceUnavailable } from "../../errors/service-errors.js";
import { onceflowCacheDir } from "../../runtime/cache-dir.js";
import { outputTail, runCommand } from "../../runtime/processes.js";
import { kafkaArtifacts, type MavenArtifact } from "./kafka-versions.js";

/**
 * Options of {@link ensureKafkaJars}.
 *
 * @example
 * ```ts
 * await ensureKafkaJars("4.1.1", { cacheDir: "/var/cache/onceflow", mavenCommand: "/opt/maven/bin/mvn" });
 * ```
 */
export interface KafkaJarsOptions {
  /** The cache root; default {@link onceflowCacheDir}. */
  cacheDir?: string;
  /** The Maven command; default `$ONCEFLOW_MAVEN` or `mvn`. */
  mavenCommand?: string;
  /** Give up on Maven after this long. Default 10 minutes. */
  timeoutMs?: number;
}

/**
 * Where a cached Kafka version lives and whether it was fetched just now.
 *
 * @example
 * ```ts
 * const { libDir, fetched, fetchMs }: KafkaJars = await ensureKafkaJars("3.9.1");
 * ```
 */
export interface KafkaJars {
  version: string;
  /** The folder with every jar; the broker's classpath is `<libDir>/*`. */
  libDir: string;
  /** True when this call ran Maven; false when the cache already had it. */
  fetched: boolean;
  /** How long the fetch took (0 when cached). */
  fetchMs: number;
}

const MARKER = "onceflow-kafka-cache.json";
// Pinned so that every machine resolves the same plugin, and no "latest" lookup is needed offline.
const DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1";

/**
 * The Maven command the testkit uses: `$ONCEFLOW_MAVEN`, else `mvn`.
 *
 * @example
 * ```ts
 * mavenCommand({ ONCEFLOW_MAVEN: "/opt/maven/bin/mvn" }); // "/opt/maven/bin/mvn"
 * ```
 */
export function mavenCommand(env: NodeJS.ProcessEnv = process.env): string {
  return env.ONCEFLOW_MAVEN || "mvn";
}

/**
 * The throwaway pom whose only purpose is `dependency:copy-dependencies` of a broker.
 *
 * @example
 * ```ts
 * await writeFile("pom.xml", kafkaPom("3.9.1"));
 * ```
 */
export function kafkaPom(
  version: string,
  artifacts: readonly MavenArtifact[] = kafkaArtifacts(version),
): string {
  const dependencies = artifacts
    .map(
      (a) =>
        `    <dependency><groupId>${a.groupId}</groupId><artifactId>${a.artifactId}</artifactId>` +
        `<version>${a.version}</version></dependency>`,
    )
    .join("\n");
  return `<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.onceflow.testkit</groupId>
  <artifactId>kafka-broker-jars</artifactId>
  <version>${version}</version>
  <packaging>pom</packaging>
  <dependencies>
${dependencies}
  </dependencies>
</project>
`;
}

/**
 * The folder a Kafka version is cached in: `<cache>/kafka-<version>`.
 *
 * @example
 * ```ts
 * kafkaCacheFolder("3.9.1"); // "/home/me/.cache/onceflow/kafka-3.9.1"
 * ```
 */
export function kafkaCacheFolder(version: string, cacheDir: string = onceflowCacheDir()): string {
  return join(cacheDir, `kafka-${version}`);
}

function recipeOf(version: string): string {
  return JSON.stringify(kafkaArtifacts(version));
}

async function isComplete(folder: string, version: string): Promise<boolean> {
  try {
    const marker = JSON.parse(await readFile(join(folder, MARKER), "utf8")) as { recipe?: string };
    return (
      marker.recipe === recipeOf(version) && existsSync(join(folder, "libs", `kafka_2.13-${version}.jar`))
    );
  } catch {
    return false;
  }
}

/**
 * Whether the jars of a Kafka version are already in the cache (so Maven is not needed).
 *
 * @example
 * ```ts
 * if (!(await hasCachedKafkaJars("4.1.1"))) console.log("first run: fetching Kafka 4.1.1");
 * ```
 */
export function hasCachedKafkaJars(version: string, cacheDir: string = onceflowCacheDir()): Promise<boolean> {
  return isComplete(kafkaCacheFolder(version, cacheDir), version);
}

/**
 * Makes sure the broker jars of `version` are in the user's cache, fetching them from Maven Central
 * with `mvn dependency:copy-dependencies` when they are not. Safe when several processes do it at
 * once: each fetches into its own temporary folder and renames it into place; the first rename wins
 * and the others discard their copy.
 *
 * @example
 * ```ts
 * const { libDir } = await ensureKafkaJars("3.9.1");
 * spawn("java", ["-cp", `${libDir}/*`, "kafka.Kafka", "server.properties"]);
 * ```
 */
export async function ensureKafkaJars(version: string, options: KafkaJarsOptions = {}): Promise<KafkaJars> {
  const cacheDir = options.cacheDir ?? onceflowCacheDir();
  const folder = kafkaCacheFolder(version, cacheDir);
  if (await isComplete(folder, version))
    return { version, libDir: join(folder, "libs"), fetched: false, fetchMs: 0 };

  const started = Date.now();
  await mkdir(cacheDir, { recursive: true });
  const staging = await mkdtemp(join(cacheDir, `.kafka-${version}.partial-`));
  try {
    await writeFile(join(staging, "pom.xml"), kafkaPom(version));
    const maven = options.mavenCommand ?? mavenCommand();
    const args = [
      "-q",
      "-B",
      "-f",
      join(staging, "pom.xml"),
      `${DEPENDENCY_PLUGIN}:copy-dependencies`,
      `-DoutputDirectory=${join(staging, "libs")}`,
      "-DincludeScope=runtime",
    ];
    let result: Awaited<ReturnType<typeof runCommand>>;
    try {
      result = await runCommand(maven, args, { timeoutMs: options.timeoutMs ?? 600_000, cwd: staging });
    } catch (error) {
      throw serviceUnavailable(
        `Cannot fetch Kafka ${version}: Maven ("${maven}") could not be started (${(error as Error).message}). ` +
          "Install Maven 3.6+ (e.g. apt-get install maven) or set ONCEFLOW_MAVEN.",
        { version, maven },
        error,
      );
    }
    if (result.code !== 0) {
      throw serviceUnavailable(
        `Cannot fetch Kafka ${version} from Maven Central: ${maven} ${args.join(" ")} ` +
          `${result.timedOut ? "timed out" : `exited with ${result.code ?? result.signal}`}:\n` +
          outputTail(`${result.stdout}${result.stderr}`),
        { version, maven },
      );
    }
    const jars = (await readdir(join(staging, "libs"))).filter((name) => name.endsWith(".jar"));
    if (!jars.includes(`kafka_2.13-${version}.jar`)) {
      throw serviceUnavailable(`Maven ran but kafka_2.13-${version}.jar is not among the fetched jars`, {
        version,
        jars,
      });
    }
    await writeFile(
      join(staging, MARKER),
      JSON.stringify({
        version,
        recipe: recipeOf(version),
        fetchedAt: new Date().toISOString(),
        jars: jars.length,
      }),
    );
    await moveIntoPlace(staging, folder, version);
    return { version, libDir: join(folder, "libs"), fetched: true, fetchMs: Date.now() - started };
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

async function moveIntoPlace(staging: string, folder: string, version: string): Promise<void> {
  // A stale folder (older recipe, or left half-deleted) is moved aside first: rename is atomic,
  // so readers see either the old complete folder or the new complete folder, never a mix.
  if (existsSync(folder) && !(await isComplete(folder, version))) {
    const trash = `${folder}.stale-${randomBytes(4).toString("hex")}`;
    await rename(folder, trash).catch(() => {});
    await rm(trash, { recursive: true, force: true });
  }
  try {
    await rename(staging, folder);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // Another process renamed its copy in first; theirs is as good as ours.
    if ((code === "ENOTEMPTY" || code === "EEXIST") && (await isComplete(folder, version))) return;
    throw error;
  }
}
