import { KafkaSink, type KafkaSinkOptions } from "@onceflow/connector-kafka";
import { kafkaBrokers } from "./kafka.js";

/** An exactly-once KafkaSink of strings on the test broker; `extra` overrides any option. */
export function exactlyOnceSink(
  topic: string,
  prefix: string,
  extra: Partial<KafkaSinkOptions<string>> = {},
): KafkaSink<string> {
  return new KafkaSink<string>({
    brokers: kafkaBrokers(),
    topic,
    deliveryGuarantee: "exactly-once",
    transactionalIdPrefix: prefix,
    ...extra,
  });
}
