/** A record to produce: kafkajs's `Message`. */
export interface ProducerMessage {
  readonly key?: Buffer | string | null;
  readonly value: Buffer | string | null;
  readonly partition?: number;
  readonly headers?: Readonly<Record<string, Buffer | string | Array<Buffer | string> | undefined>>;
  readonly timestamp?: string;
}
