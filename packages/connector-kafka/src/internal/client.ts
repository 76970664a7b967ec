import { ConfigurationError } from "@onceflow/core";
import type { Kafka } from "kafkajs";
import { kafkajs } from "./kafkajs/kafkajs-loader.js";
import { responseSocketFactory } from "./kafkajs/response-socket.js";

/**
 * The connection options shared by the source, the sink and the admin functions (exported as
 * `KafkaClientOptions`): give either `brokers` or your own kafkajs `kafka` client.
 *
 * @example
 * ```ts
 * const connection: KafkaClientOptions = { brokers: ["localhost:9092"], clientId: "orders-job" };
 * ```
 */
export interface ClientOptions {
  /** The bootstrap brokers, for example `["localhost:9092"]`. */
  readonly brokers?: readonly string[];
  /** A kafkajs client of your own (SSL, SASL, ...), instead of `brokers`. */
  readonly kafka?: Kafka;
  /** The client id of the client made from `brokers` (default `onceflow`). */
  readonly clientId?: string;
}

/** Checks that exactly one of `brokers` and `kafka` is given. */
export function validateClientOptions(options: ClientOptions): void {
  if (options.kafka !== undefined && options.brokers !== undefined) {
    throw new ConfigurationError("brokers", "give either `brokers` or a kafkajs `kafka` client, not both");
  }
  if (options.kafka === undefined && (options.brokers === undefined || options.brokers.length === 0)) {
    throw new ConfigurationError(
      "brokers",
      'no Kafka to connect to: set `brokers` (for example ["localhost:9092"]) or pass a kafkajs `kafka` client',
    );
  }
}

/** The user's client, or one made from `brokers` that logs nothing (onceflow never logs unasked). */
export function kafkaClientOf(options: ClientOptions): Kafka {
  if (options.kafka !== undefined) return options.kafka;
  const { Kafka, logLevel } = kafkajs();
  return new Kafka({
    brokers: [...(options.brokers ?? [])],
    clientId: options.clientId ?? "onceflow",
    logLevel: logLevel.NOTHING,
    // Large responses read straight into their own buffers (response-socket.ts).
    socketFactory: responseSocketFactory(),
  });
}

/**
 * {@link kafkaClientOf}, made on the first call: a source or sink is built wherever its job module
 * is imported, and makes its client (loading kafkajs) only when it first talks to Kafka.
 */
export function lazyKafkaClientOf(options: ClientOptions): () => Kafka {
  let kafka: Kafka | undefined = options.kafka;
  return () => {
    if (kafka === undefined) kafka = kafkaClientOf(options);
    return kafka;
  };
}

/** Rejects a non-positive or non-integer number setting. */
export function requirePositiveInteger(setting: string, value: number | undefined): void {
  if (value !== undefined && (!Number.isInteger(value) || value <= 0)) {
    throw new ConfigurationError(setting, `must be a positive integer, got ${value}`);
  }
}
