/**
 * What the record batch decoder still takes from kafkajs's internals: its compression codec registry
 * and its decoder of old message sets (magic 0 and 1). Kept here so that `protocol/` touches no
 * kafkajs internals.
 */
import { kafkajsModule } from "./kafkajs-loader.js";

/** A compression codec as kafkajs registers it. */
export interface KafkajsCodec {
  decompress(buffer: Buffer): Promise<Buffer>;
}

/** An entry of an old message set, as kafkajs decodes it. */
export interface LegacyMessage {
  readonly offset: string;
  readonly timestamp?: string;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
}

/** kafkajs's codec registry: gzip built in, the others registered by the user (`CompressionCodecs`). */
const compression = kafkajsModule<{
  lookupCodecByAttributes(attributes: number): KafkajsCodec | null;
}>("kafkajs/src/protocol/message/compression");
const KafkajsDecoder = kafkajsModule<new (buffer: Buffer) => unknown>("kafkajs/src/protocol/decoder");
const decodeMessageSet = kafkajsModule<(decoder: unknown, size: number) => Promise<LegacyMessage[]>>(
  "kafkajs/src/protocol/messageSet/decoder",
);

/**
 * The codec kafkajs has registered for a record batch's compression attribute, or `null` for none.
 * A codec kafkajs lacks throws its `KafkaJSNotImplemented`.
 */
export function kafkajsCodecFor(attributes: number): KafkajsCodec | null {
  return compression().lookupCodecByAttributes(attributes);
}

/** The messages of an old message set entry (magic 0 or 1), through kafkajs's decoder. */
export function decodeLegacyMessageSet(entry: Buffer): Promise<LegacyMessage[]> {
  return decodeMessageSet()(new (KafkajsDecoder())(entry), entry.length);
}
