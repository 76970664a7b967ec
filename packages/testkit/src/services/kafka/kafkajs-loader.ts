import { importOptionalModule } from "../../runtime/optional-module.js";

/**
 * The `kafkajs` module. An optional peer dependency of the testkit, loaded only by the Kafka service
 * and its helpers (`startKafka`, `createKafkaTopic`, `readCommittedKafkaRecords`).
 *
 * @example
 * ```ts
 * const { Kafka }: KafkajsModule = await loadKafkajs();
 * ```
 */
export type KafkajsModule = typeof import("kafkajs");

/**
 * What to run to get the Kafka service's client library.
 *
 * @example
 * ```ts
 * console.log(KAFKAJS_INSTALL_HINT); // "npm i -D kafkajs@2.2.4"
 * ```
 */
export const KAFKAJS_INSTALL_HINT = "npm i -D kafkajs@2.2.4";

let loading: Promise<KafkajsModule> | undefined;

/**
 * Loads kafkajs once; when it is not installed, rejects with an `OnceflowError` (`CONFIGURATION`)
 * that says to install it.
 *
 * @example
 * ```ts
 * const { Kafka, logLevel } = await loadKafkajs();
 * ```
 */
export function loadKafkajs(): Promise<KafkajsModule> {
  loading ??= importOptionalModule("kafkajs", () => import("kafkajs"), {
    neededBy: "The testkit's Kafka service (startKafka, createKafkaTopic, readCommittedKafkaRecords)",
    install: KAFKAJS_INSTALL_HINT,
  }).catch((error: unknown) => {
    loading = undefined; // installed later in a watch run: try again next time
    throw error;
  });
  return loading;
}
