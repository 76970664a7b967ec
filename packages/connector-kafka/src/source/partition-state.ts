// The per-partition state a `KafkaSourceReader` keeps: its positions and its buffer of fetched
// chunks, shared by the reader (which hands records out), the `Prefetcher` (which fills the buffer)
// and the `RecordDecoder` (which reads the partition's deserialization context).
import type { RecordColumns } from "../internal/kafkajs/internals.js";
import type { DeserializationContext } from "./deserializer.js";
import type { KafkaPartitionSplit } from "./kafka-partition-split.js";

/** The records of one Fetch response for one partition, handed out from `index` on. */
export interface Chunk {
  /** Released to the thread's pool by the reader once every record is handed out or dropped. */
  readonly records: RecordColumns;
  index: number;
  /** The position after this chunk, past control and aborted batches too. */
  readonly nextOffset: bigint;
  readonly bytes: number;
}

/** One assigned partition of a reader. */
export interface PartitionState {
  readonly split: KafkaPartitionSplit;
  readonly topic: string;
  readonly partition: number;
  /** The next offset to hand out: the position a checkpoint records. */
  nextOffset: bigint;
  /** The next offset to fetch (ahead of `nextOffset` by what is buffered). */
  fetchOffset: bigint;
  readonly stoppingOffset: bigint | undefined;
  readonly chunks: Chunk[];
  inFlight: boolean;
  /** Left out of Fetch requests until then (ms since the epoch), after a failure of its own. */
  retryAt?: number;
  /** The backoff of its last failure; cleared by records fetched. */
  retryDelay?: number;
  /** Given to deserializers that never read it (the built-in ones); its offset is not set. */
  readonly context: DeserializationContext;
}
