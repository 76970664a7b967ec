/**
 * kafkajs is loaded on first use, not when the connector is imported. A job module is also imported
 * where no client is ever made — the main thread of a job whose subtasks run in worker threads
 * imports it only to read the job's graph, before it starts the threads — and kafkajs (143 CommonJS
 * files) is about half of what that import loads, on the path to such a job's first checkpoint.
 * Every value taken from kafkajs goes through this module; type imports cost nothing at run time.
 */
import { createRequire } from "node:module";
import type * as Kafkajs from "kafkajs";

const requireKafkajs = createRequire(import.meta.url);

/**
 * A function that loads one kafkajs module (its public entry point or one of its internals, such as
 * `kafkajs/src/protocol/encoder`) the first time it is called and returns it from then on.
 *
 * @example
 * ```ts
 * const encoderClass = kafkajsModule<new () => { buf: Buffer }>("kafkajs/src/protocol/encoder");
 * const encoder = new (encoderClass())();
 * ```
 */
export function kafkajsModule<T>(path: string): () => T {
  let loaded: T | undefined;
  // Memoized rather than left to require's cache: some are looked up per fetch or produce request.
  return () => {
    if (loaded === undefined) loaded = requireKafkajs(path) as T;
    return loaded;
  };
}

/**
 * kafkajs's public API (`Kafka`, `Partitioners`, `logLevel`), loaded on first call.
 *
 * @example
 * ```ts
 * const kafka = new (kafkajs().Kafka)({ brokers: ["localhost:9092"] });
 * ```
 */
export const kafkajs: () => typeof Kafkajs = kafkajsModule<typeof Kafkajs>("kafkajs");
