import { ConfigurationError } from "@onceflow/core";

/**
 * The Kafka releases the testkit knows: the default (3.9.x) and the 4.x release the connector is
 * also tested against. Any other exact `x.y.z` from Maven Central works too.
 *
 * @example
 * ```ts
 * await startKafka({ version: KAFKA_VERSIONS.latest4 });
 * ```
 */
export const KAFKA_VERSIONS = {
  /** Used when nothing asks for another version. */
  default: "3.9.1",
  /** What "4", "4.x" or "latest4" resolve to. */
  latest4: "4.1.1",
} as const;

const ALIASES: Readonly<Record<string, string>> = {
  "3": KAFKA_VERSIONS.default,
  "3.x": KAFKA_VERSIONS.default,
  "3.9": KAFKA_VERSIONS.default,
  "3.9.x": KAFKA_VERSIONS.default,
  default: KAFKA_VERSIONS.default,
  "4": KAFKA_VERSIONS.latest4,
  "4.x": KAFKA_VERSIONS.latest4,
  "4.1": KAFKA_VERSIONS.latest4,
  "4.1.x": KAFKA_VERSIONS.latest4,
  latest4: KAFKA_VERSIONS.latest4,
};

/**
 * The exact Kafka version to run: the option, else `ONCEFLOW_KAFKA_VERSION`, else
 * {@link KAFKA_VERSIONS}.default. Aliases like "4" or "3.9" resolve to the known release; an exact
 * `x.y.z` passes through. Kafka before 3.3 has no production KRaft mode and is refused.
 *
 * @example
 * ```ts
 * resolveKafkaVersion("4"); // "4.1.1"
 * resolveKafkaVersion(undefined, { ONCEFLOW_KAFKA_VERSION: "4.2.0" }); // "4.2.0"
 * ```
 */
export function resolveKafkaVersion(requested?: string, env: NodeJS.ProcessEnv = process.env): string {
  const fromEnv = env.ONCEFLOW_KAFKA_VERSION?.trim();
  const raw = requested?.trim() || fromEnv || KAFKA_VERSIONS.default;
  const setting = requested?.trim() ? "startKafka({ version })" : "ONCEFLOW_KAFKA_VERSION";
  const version = ALIASES[raw] ?? raw;
  const match = /^(\d+)\.(\d+)\.(\d+)$/.exec(version);
  if (match === null) {
    throw new ConfigurationError(
      setting,
      `"${raw}" is not a Kafka version: use an exact release such as "3.9.1" or "4.1.1", or "3"/"4"`,
    );
  }
  const major = Number(match[1]);
  const minor = Number(match[2]);
  if (major < 3 || (major === 3 && minor < 3)) {
    throw new ConfigurationError(setting, `Kafka ${version} has no KRaft mode for tests; use 3.3 or newer`);
  }
  return version;
}

/**
 * The major version number of an exact Kafka version.
 *
 * @example
 * ```ts
 * kafkaMajor("4.1.1"); // 4
 * ```
 */
export function kafkaMajor(version: string): number {
  return Number(version.split(".")[0]);
}

/**
 * One Maven artifact, `groupId:artifactId:version`.
 *
 * @example
 * ```ts
 * const broker: MavenArtifact = { groupId: "org.apache.kafka", artifactId: "kafka_2.13", version: "3.9.1" };
 * ```
 */
export interface MavenArtifact {
  groupId: string;
  artifactId: string;
  version: string;
}

/**
 * What to fetch from Maven Central to run a broker of `version`: the broker itself plus a logging
 * backend, which is not a transitive dependency (reload4j for 3.x, log4j2 for 4.x).
 *
 * @example
 * ```ts
 * kafkaArtifacts("3.9.1").map((a) => a.artifactId); // ["kafka_2.13", "reload4j", "slf4j-reload4j"]
 * ```
 */
export function kafkaArtifacts(version: string): MavenArtifact[] {
  const broker = { groupId: "org.apache.kafka", artifactId: "kafka_2.13", version };
  if (kafkaMajor(version) >= 4) {
    const log4j = "2.24.3";
    return [
      broker,
      { groupId: "org.apache.logging.log4j", artifactId: "log4j-api", version: log4j },
      { groupId: "org.apache.logging.log4j", artifactId: "log4j-core", version: log4j },
      // Kafka 4.x still logs through slf4j 1.7, so the 1.x binding (not log4j-slf4j2-impl).
      { groupId: "org.apache.logging.log4j", artifactId: "log4j-slf4j-impl", version: log4j },
    ];
  }
  return [
    broker,
    { groupId: "ch.qos.reload4j", artifactId: "reload4j", version: "1.2.25" },
    { groupId: "org.slf4j", artifactId: "slf4j-reload4j", version: "1.7.36" },
  ];
}

/**
 * The lowest Java major a broker of `version` runs on.
 *
 * @example
 * ```ts
 * minimumJavaFor("4.1.1"); // 17
 * ```
 */
export function minimumJavaFor(version: string): number {
  return kafkaMajor(version) >= 4 ? 17 : 11;
}
