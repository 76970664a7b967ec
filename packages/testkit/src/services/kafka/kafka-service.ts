import type { ServiceWriter } from "../../runtime/announce.js";
import type { ProviderKind } from "../providers/provider-selection.js";
import type { CreateTopicOptions } from "./kafka-admin.js";

/**
 * A running Kafka broker for tests, whatever provides it.
 *
 * @example
 * ```ts
 * const kafka = await startKafka();
 * await kafka.createTopic("orders", { partitions: 2 });
 * // … produce/consume with kafka.brokers …
 * await kafka.stop();
 * ```
 */
export interface KafkaService {
  /** Bootstrap addresses, `host:port`. */
  readonly brokers: readonly string[];
  /** The Kafka version running (what `ONCEFLOW_KAFKA_VERSION` says for an environment broker, else "unknown"). */
  readonly version: string;
  readonly provider: ProviderKind;
  /** The broker JVM's process id (local provider only), for checking it is gone after {@link stop}. */
  readonly pid: number | undefined;
  /** The temporary folder with the broker's config, log and data (local provider only). */
  readonly workDir: string | undefined;
  /** The SASL_PLAINTEXT listener, when started with `saslPlain: true` (else `undefined`). */
  readonly sasl: KafkaSaslListener | undefined;
  /** Creates a topic and waits for its partition leaders. */
  createTopic(name: string, options: CreateTopicOptions): Promise<void>;
  /** Kills the broker the hard way (SIGKILL, or the container equivalent); its data stays. */
  kill(): Promise<void>;
  /** Brings a killed broker back on the same data and the same port; waits until it serves. */
  start(): Promise<void>;
  /** Stops the broker (SIGTERM, then SIGKILL after a grace period) and deletes its data. */
  stop(): Promise<void>;
}

/**
 * A broker's SASL_PLAINTEXT listener (mechanism PLAIN) and its one user, for testing clients that
 * authenticate.
 *
 * @example
 * ```ts
 * const { brokers, username, password } = kafka.sasl!;
 * new Kafka({ brokers: [...brokers], sasl: { mechanism: "plain", username, password } });
 * ```
 */
export interface KafkaSaslListener {
  /** Bootstrap addresses of the SASL listener, `host:port`. */
  readonly brokers: readonly string[];
  readonly mechanism: "plain";
  readonly username: string;
  readonly password: string;
}

/**
 * Options of `startKafka`.
 *
 * @example
 * ```ts
 * const kafka = await startKafka({ version: "4.1.1", faultInjection: true });
 * ```
 */
export interface StartKafkaOptions {
  /** Exact version or alias ("3.9.1", "4.1.1", "4"); default `ONCEFLOW_KAFKA_VERSION` or 3.9.1. */
  version?: string;
  /** Use only this provider instead of trying environment → testcontainers → local. */
  provider?: ProviderKind;
  /** This test kills or restarts the broker: skip `ONCEFLOW_KAFKA_BROKERS` and start a private one. */
  faultInjection?: boolean;
  /**
   * Also listen with SASL_PLAINTEXT, mechanism PLAIN (see {@link KafkaService.sasl}): a private
   * broker from the local provider (Java and the Maven Central jars); the environment's broker and
   * the container provider cannot add it, and another `provider` is a configuration error.
   */
  saslPlain?: boolean;
  /** How long to wait for the broker to serve. Default 180 s. */
  startTimeoutMs?: number;
  /** Where the "which provider/version" line goes; default stderr. */
  writer?: ServiceWriter;
  /** The cache root for the jars; default `$ONCEFLOW_CACHE_DIR`, `$XDG_CACHE_HOME/onceflow` or `~/.cache/onceflow`. */
  cacheDir?: string;
  /**
   * The container image for the testcontainers provider; default `ONCEFLOW_KAFKA_IMAGE`, else
   * `apache/kafka:<version>`. `{version}` is replaced by the Kafka version.
   */
  image?: string;
  /** How long the Docker-engine probe may take. Default 15 s. */
  dockerProbeTimeoutMs?: number;
  /**
   * How long pulling a missing image may take before the container provider counts as unavailable
   * (the next provider is tried unless one is pinned). Default 300 s.
   */
  imagePullTimeoutMs?: number;
  /** The environment to read variables from; default `process.env`. */
  env?: NodeJS.ProcessEnv;
}
