import { ConfigurationError } from "@onceflow/core";
import { serviceUnavailable } from "../../errors/service-errors.js";
import { announceOnce, stderrWriter } from "../../runtime/announce.js";
import { onceflowCacheDir } from "../../runtime/cache-dir.js";
import { containerProbe, providerFromEnvironment, resolveImage } from "../providers/container-images.js";
import { probeDockerEngine } from "../providers/docker-engine-probe.js";
import { chooseProvider, providerOrder } from "../providers/provider-selection.js";
import { startContainerKafka } from "./container-kafka.js";
import { brokersFromEnvironment, probeKafkaEnvironment, useEnvironmentKafka } from "./environment-kafka.js";
import type { KafkaService, StartKafkaOptions } from "./kafka-service.js";
import { resolveKafkaVersion } from "./kafka-versions.js";
import { loadKafkajs } from "./kafkajs-loader.js";
import { type LocalKafkaRequirements, probeLocalKafka, startLocalKafka } from "./local-kafka.js";

/**
 * Starts (or finds) a real Kafka broker for tests. Providers are tried in order: a broker named by
 * `ONCEFLOW_KAFKA_BROKERS`; a container through testcontainers when a Docker engine answers; a local
 * KRaft broker from Maven Central jars on Java 17. When none is possible it throws an `OnceflowError`
 * (`SERVICE_UNAVAILABLE`) listing what was tried and what to install; it never skips. The choice is
 * written once per run to `options.writer` (stderr by default).
 *
 * Each call starts its own broker (except for the environment provider): a test that kills or
 * restarts a broker should start a private one with `faultInjection: true`.
 *
 * @example
 * ```ts
 * const kafka = await startKafka({ faultInjection: true });
 * await kafka.createTopic("t1", { partitions: 1 });
 * await kafka.kill();  // SIGKILL
 * await kafka.start(); // same data, same port
 * await kafka.stop();
 * ```
 */
export async function startKafka(options: StartKafkaOptions = {}): Promise<KafkaService> {
  await loadKafkajs(); // an optional peer: say so before starting anything when it is missing
  const env = options.env ?? process.env;
  const version = resolveKafkaVersion(options.version, env);
  const cacheDir = options.cacheDir ?? onceflowCacheDir(env);
  const startTimeoutMs = options.startTimeoutMs ?? 180_000;
  let local: LocalKafkaRequirements | undefined;
  const image = resolveImage("kafka", {
    option: options.image,
    env,
    fallback: `apache/kafka:${version}`,
    version,
  });

  if (options.saslPlain === true && options.provider !== undefined && options.provider !== "local") {
    throw new ConfigurationError(
      "saslPlain",
      `a SASL listener is added to local brokers only, not by the ${options.provider} provider: leave \`provider\` unset or set it to "local"`,
    );
  }
  // A SASL listener is written into the broker's configuration: only a local broker of its own has it.
  const order =
    options.saslPlain === true
      ? providerOrder({ provider: "local", faultInjection: true })
      : providerOrder({
          provider: options.provider ?? providerFromEnvironment(env),
          faultInjection: options.faultInjection,
        });
  const decision = await chooseProvider("Kafka", order, {
    environment: async () => probeKafkaEnvironment(env),
    testcontainers: containerProbe(() => probeDockerEngine({ timeoutMs: options.dockerProbeTimeoutMs }), {
      service: "kafka",
      image,
      pullTimeoutMs: options.imagePullTimeoutMs,
    }),
    local: async () => {
      const { probe, requirements } = await probeLocalKafka(version, cacheDir, env);
      local = requirements;
      return probe;
    },
  });
  if (!decision.ok)
    throw serviceUnavailable(decision.message, { service: "kafka", version, tried: decision.tried });

  const started = Date.now();
  let service: KafkaService;
  let extra = "";
  switch (decision.provider) {
    case "environment": {
      const named = env.ONCEFLOW_KAFKA_VERSION?.trim() || "unknown";
      service = await useEnvironmentKafka(brokersFromEnvironment(env), named, 30_000);
      break;
    }
    case "testcontainers":
      service = await startContainerKafka({ version, image, startTimeoutMs });
      break;
    case "local": {
      if (local === undefined) throw serviceUnavailable("local Kafka probe gave no requirements");
      const broker = await startLocalKafka({
        version,
        java: local.java,
        cacheDir,
        startTimeoutMs,
        saslPlain: options.saslPlain === true,
      });
      service = broker;
      if (broker.fetchMs > 0) extra = `, jars fetched from Maven Central in ${broker.fetchMs} ms`;
      break;
    }
  }
  announceOnce(
    `kafka|${service.provider}|${service.version}`,
    `onceflow testkit: Kafka ${service.version} via ${service.provider} (${decision.probe.detail}${extra}) ` +
      `at ${service.brokers.join(",")}${service.sasl === undefined ? "" : ` (SASL_PLAINTEXT at ${service.sasl.brokers.join(",")})`}, ready in ${Date.now() - started} ms`,
    options.writer ?? stderrWriter,
    env,
  );
  return service;
}
