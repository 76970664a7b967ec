/**
 * What the record batch decoder still takes from kafkajs's internals: its decoder of old message
 * sets (magic 0 and 1), which decompresses them through kafkajs's codec registry
 * (`CompressionCodecs`: gzip built in, others registered by the user). Kept here so that
 * `protocol/` touches no kafkajs internals.
 */
import { kafkajsModule } from "./kafkajs-loader.js";

/** An entry of an old message set, as kafkajs decodes it. */
export interface LegacyMessage {
  readonly offset: string;
  readonly timestamp?: string;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
}

const KafkajsDecoder = kafkajsModule<new (buffer: Buffer) => unknown>("kafkajs/src/protocol/decoder");
const decodeMessageSet = kafkajsModule<(decoder: unknown, size: number) => Promise<LegacyMessage[]>>(
  "kafkajs/src/protocol/messageSet/decoder",
);

/** The messages of an old message set entry (magic 0 or 1), through kafkajs's decoder. */
export function decodeLegacyMessageSet(entry: Buffer): Promise<LegacyMessage[]> {
  return decodeMessageSet()(new (KafkajsDecoder())(entry), entry.length);
}
