// The producer settings of a `KafkaSink`, named as the Java producer's: checked when the sink is
// built (a ConfigurationError says what to change) and resolved to what the produce path runs with.
import { ConfigurationError } from "@onceflow/core";
import type { KafkajsRetry, ProducerStartOptions } from "../internal/kafkajs/internals.js";

/**
 * The Java producer's settings a {@link KafkaSink} offers, camelCased (`batch.size` →
 * `batchSize`). Defaults are the Java producer's, except `batchSize` (256 KiB: larger batches cost
 * this thread less per record).
 *
 * @example
 * ```ts
 * const settings: KafkaProducerSettings = { batchSize: 65_536, deliveryTimeoutMs: 60_000, maxRequestSize: 4_194_304 };
 * ```
 */
export interface KafkaProducerSettings {
  /**
   * A partition's batch is sent once it holds this many bytes (`batch.size`, default 262144); a
   * lone larger record gets a batch of its own. At most `maxRequestSize`.
   */
  readonly batchSize?: number;
  /**
   * The largest Produce request (`max.request.size`, default 1048576): a request carries batches of
   * several partitions up to this size, and a record larger than this (key, value, headers and
   * their framing) is refused before it is sent, with a `KafkaRecordRejectedError`
   * (`RECORD_TOO_LARGE`). Keep it at or below the topic's `max.message.bytes`.
   */
  readonly maxRequestSize?: number;
  /**
   * Produce requests in flight per broker (`max.in.flight.requests.per.connection`, default 5,
   * from 1 to 5: the producer is always idempotent). Each partition has at most one in flight, so
   * order holds with any value.
   */
  readonly maxInFlightRequestsPerConnection?: number;
  /**
   * How long a Produce request waits for its answer (`request.timeout.ms`, default 30000): the
   * broker's wait for the replicas' acknowledgements and the client's wait for the response. A
   * timed-out request is sent again (same batch, same sequence).
   */
  readonly requestTimeoutMs?: number;
  /**
   * Resends of a batch after retriable errors (`retries`; default: as many as `deliveryTimeoutMs`
   * allows, or the kafkajs client's `retry.retries` when you pass a client that sets it).
   */
  readonly retries?: number;
  /**
   * The first wait before a resend (`retry.backoff.ms`, default 100, or the kafkajs client's
   * `retry.initialRetryTime`); it doubles per resend (or the client's `retry.multiplier`).
   */
  readonly retryBackoffMs?: number;
  /** The longest wait before a resend (`retry.backoff.max.ms`, default 1000, or the client's `retry.maxRetryTime`). */
  readonly retryBackoffMaxMs?: number;
  /**
   * The longest a record may take from the sink's write to its acknowledgement, resends included
   * (`delivery.timeout.ms`, default 120000). Past it the send fails with a
   * `KafkaDeliveryTimeoutError` (`SERVICE_UNAVAILABLE`: the job restarts from its last
   * checkpoint). At least `lingerMs + requestTimeoutMs`.
   */
  readonly deliveryTimeoutMs?: number;
  /**
   * `acks`: only `"all"` (or `-1`), the default — the sink's producer is idempotent (sequence
   * numbers keep a resent batch once and in order), which needs every in-sync replica's
   * acknowledgement. For writes that wait for nothing, use `deliveryGuarantee: "none"`.
   */
  readonly acks?: "all" | -1;
}

/** The resolved settings the produce path runs with. */
export interface ResolvedProducerSettings {
  readonly batchSize: number;
  readonly maxRequestSize: number;
  readonly maxInFlightRequestsPerConnection: number;
  readonly requestTimeoutMs: number;
  readonly deliveryTimeoutMs: number;
  readonly retry: {
    readonly retries: number;
    readonly initialRetryTime: number;
    readonly maxRetryTime: number;
    readonly multiplier: number;
  };
}

/** The defaults of {@link KafkaProducerSettings}. */
export const PRODUCER_DEFAULTS = {
  batchSize: 256 * 1024,
  maxRequestSize: 1024 * 1024,
  maxInFlightRequestsPerConnection: 5,
  requestTimeoutMs: 30_000,
  deliveryTimeoutMs: 120_000,
  retryBackoffMs: 100,
  retryBackoffMaxMs: 1000,
} as const;

/** Kafka's limit for idempotent producers: the broker keeps the sequences of 5 batches per partition. */
const MAX_IN_FLIGHT_IDEMPOTENT = 5;

/**
 * Checks `settings` and fills in the defaults; `clientRetry` is the kafkajs client's own `retry`
 * option, used where the sink sets nothing. `lingerMs` is the sink's resolved linger.
 */
export function resolveProducerSettings(
  settings: KafkaProducerSettings,
  lingerMs: number,
  clientRetry: KafkajsRetry | undefined,
): ResolvedProducerSettings {
  const integerAtLeast = (setting: keyof KafkaProducerSettings, value: number | undefined, min: number) => {
    if (value !== undefined && !(Number.isInteger(value) && value >= min)) {
      throw new ConfigurationError(setting, `must be an integer ≥ ${min}, got ${value}`);
    }
  };
  integerAtLeast("batchSize", settings.batchSize, 1);
  integerAtLeast("maxRequestSize", settings.maxRequestSize, 1);
  integerAtLeast("maxInFlightRequestsPerConnection", settings.maxInFlightRequestsPerConnection, 1);
  integerAtLeast("requestTimeoutMs", settings.requestTimeoutMs, 1);
  integerAtLeast("deliveryTimeoutMs", settings.deliveryTimeoutMs, 1);
  integerAtLeast("retries", settings.retries, 0);
  integerAtLeast("retryBackoffMs", settings.retryBackoffMs, 0);
  integerAtLeast("retryBackoffMaxMs", settings.retryBackoffMaxMs, 0);
  const acks = settings.acks as unknown;
  if (acks !== undefined && acks !== "all" && acks !== -1 && acks !== "-1") {
    throw new ConfigurationError(
      "acks",
      `must be "all" (or -1), got ${JSON.stringify(acks)}: the sink's producer is idempotent (a resent batch is written once and in order), which needs acks=all; for writes that wait for nothing, use deliveryGuarantee "none"`,
    );
  }
  const maxInFlight =
    settings.maxInFlightRequestsPerConnection ?? PRODUCER_DEFAULTS.maxInFlightRequestsPerConnection;
  if (maxInFlight > MAX_IN_FLIGHT_IDEMPOTENT) {
    throw new ConfigurationError(
      "maxInFlightRequestsPerConnection",
      `must be at most ${MAX_IN_FLIGHT_IDEMPOTENT} (the producer is idempotent, as enable.idempotence=true; brokers keep the sequences of 5 batches per partition), got ${maxInFlight}`,
    );
  }
  const maxRequestSize = settings.maxRequestSize ?? PRODUCER_DEFAULTS.maxRequestSize;
  const batchSize = settings.batchSize ?? Math.min(PRODUCER_DEFAULTS.batchSize, maxRequestSize);
  if (batchSize > maxRequestSize) {
    throw new ConfigurationError(
      "batchSize",
      `must not exceed maxRequestSize (${maxRequestSize}), got ${batchSize}: lower batchSize or raise maxRequestSize`,
    );
  }
  const requestTimeoutMs = settings.requestTimeoutMs ?? PRODUCER_DEFAULTS.requestTimeoutMs;
  const deliveryTimeoutMs = settings.deliveryTimeoutMs ?? PRODUCER_DEFAULTS.deliveryTimeoutMs;
  if (deliveryTimeoutMs < lingerMs + requestTimeoutMs) {
    throw new ConfigurationError(
      "deliveryTimeoutMs",
      `must be at least lingerMs + requestTimeoutMs (${lingerMs} + ${requestTimeoutMs} ms), got ${deliveryTimeoutMs}: raise deliveryTimeoutMs or lower requestTimeoutMs`,
    );
  }
  const initialRetryTime =
    settings.retryBackoffMs ?? clientRetry?.initialRetryTime ?? PRODUCER_DEFAULTS.retryBackoffMs;
  const maxRetryTime = Math.max(
    initialRetryTime,
    settings.retryBackoffMaxMs ?? clientRetry?.maxRetryTime ?? PRODUCER_DEFAULTS.retryBackoffMaxMs,
  );
  return {
    batchSize,
    maxRequestSize,
    maxInFlightRequestsPerConnection: maxInFlight,
    requestTimeoutMs,
    deliveryTimeoutMs,
    retry: {
      // Unbounded but for the delivery timeout, as the Java producer's Integer.MAX_VALUE.
      retries: settings.retries ?? clientRetry?.retries ?? Number.MAX_SAFE_INTEGER,
      initialRetryTime,
      maxRetryTime,
      multiplier: clientRetry?.multiplier ?? 2,
    },
  };
}

/** What the produce path is started with: the settings under the producer's own names. */
export type ProducerStartSettings = NonNullable<ProducerStartOptions["settings"]>;

/** {@link resolveProducerSettings}, under the names the produce path takes. */
export function producerStartSettings(
  settings: KafkaProducerSettings,
  lingerMs: number,
  clientRetry: KafkajsRetry | undefined,
): ProducerStartSettings {
  const resolved = resolveProducerSettings(settings, lingerMs, clientRetry);
  return {
    batchBytes: resolved.batchSize,
    maxRequestBytes: resolved.maxRequestSize,
    maxInFlightRequestsPerBroker: resolved.maxInFlightRequestsPerConnection,
    requestTimeoutMs: resolved.requestTimeoutMs,
    deliveryTimeoutMs: resolved.deliveryTimeoutMs,
    retry: resolved.retry,
  };
}
