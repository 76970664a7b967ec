import type { HeadersToWrite } from "../protocol/record-batch-encoder.js";

/** A record to produce: kafkajs's `Message` fits; headers may also be an ordered list of pairs. */
export interface ProducerMessage {
  readonly key?: Buffer | string | null;
  readonly value: Buffer | string | null;
  readonly partition?: number;
  readonly headers?: HeadersToWrite;
  readonly timestamp?: string;
}
