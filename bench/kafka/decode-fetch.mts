/**
 * Micro benchmark: the cost of decoding Fetch v11 responses into onceflow's `RawRecord`s, before
 * (kafkajs's record batch decoder, then the filtering and conversion onceflow did) and after (the
 * lean decoder of `protocol/fetch-response.ts`), side by side in one run, alternating.
 *
 *   node --expose-gc --import tsx bench/kafka/decode-fetch.mts [--records 1000000] [--rounds 5] [--headers 0]
 *     [--value-bytes 100]
 *
 * The response is synthesized: 4 partitions of ~1 MiB (the source's default max bytes per
 * partition), batches of 500 records as the exactly-once sink writes them (transactional), with a
 * commit marker after each 8 batches. Reports ms per 1M records, the GC pauses seen in that time
 * (PerformanceObserver "gc" entries, which include concurrent phases) and the ratio.
 */
import { createRequire } from "node:module";
import { PerformanceObserver, performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { crc32c } from "../../packages/connector-kafka/src/protocol/crc32c.js";
import {
  type DecodedMessage,
  decodeFetchV11,
  type FetchResponse,
  fetchedPartitions,
  partitionKey,
  recordsFromKafkajs,
} from "../../packages/connector-kafka/src/protocol/fetch-response.js";
import { type RawRecord, viewsOf } from "../../packages/connector-kafka/src/protocol/record-batch-decoder.js";
import { encodeRecordBatch } from "../../packages/connector-kafka/src/protocol/record-batch-encoder.js";

const { values: args } = parseArgs({
  options: {
    records: { type: "string", default: "1000000" },
    rounds: { type: "string", default: "5" },
    headers: { type: "string", default: "0" },
    "value-bytes": { type: "string", default: "100" },
  },
});
const TOTAL = Number(args.records);
const ROUNDS = Number(args.rounds);
const HEADERS = Number(args.headers);
const VALUE_BYTES = Number(args["value-bytes"]);
const PARTITIONS = 4;
const PARTITION_BYTES = 1024 * 1024;
const BATCH_RECORDS = 500;
const TOPIC = "bench-topic";
const PRODUCER_ID = 4001n;

// ---- the response ----
function int16(v: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeInt16BE(v);
  return b;
}
function int32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(v);
  return b;
}
function int64(v: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(v);
  return b;
}

function commitMarker(offset: bigint): Buffer {
  // A control batch: one record, key = version 0, type 1 (commit).
  const batch = encodeRecordBatch(
    [{ key: Buffer.from([0, 0, 0, 1]), value: Buffer.alloc(6) }],
    1_700_000_000_000,
    {
      producerId: PRODUCER_ID,
      producerEpoch: 0,
      baseSequence: -1,
      transactional: true,
    },
  );
  batch.writeBigInt64BE(offset, 0);
  batch.writeInt16BE(batch.readInt16BE(21) | 0x20, 21);
  batch.writeUInt32BE(crc32c(batch, 21), 17);
  return batch;
}

function recordSet(): { bytes: Buffer; records: number } {
  const value = Buffer.alloc(VALUE_BYTES, 120);
  const parts: Buffer[] = [];
  let size = 0;
  let offset = 0n;
  let records = 0;
  for (let b = 0; ; b++) {
    const batch = encodeRecordBatch(
      Array.from({ length: BATCH_RECORDS }, (_, i) => ({
        key: `key-${(records + i) % 10_000}`,
        value,
        timestamp: 1_700_000_000_000 + i,
        headers:
          HEADERS === 0
            ? undefined
            : Object.fromEntries(Array.from({ length: HEADERS }, (_, h) => [`h${h}`, "v"])),
      })),
      0,
      { producerId: PRODUCER_ID, producerEpoch: 0, baseSequence: records, transactional: true },
    );
    if (size + batch.length > PARTITION_BYTES) break;
    batch.writeBigInt64BE(offset, 0);
    parts.push(batch);
    size += batch.length;
    offset += BigInt(BATCH_RECORDS);
    records += BATCH_RECORDS;
    if (b % 8 === 7) {
      parts.push(commitMarker(offset));
      offset += 1n;
    }
  }
  return { bytes: Buffer.concat(parts), records };
}

const set = recordSet();
const parts: Buffer[] = [int32(0), int16(0), int32(0), int32(1), int16(TOPIC.length), Buffer.from(TOPIC)];
parts.push(int32(PARTITIONS));
for (let p = 0; p < PARTITIONS; p++) {
  parts.push(int32(p), int16(0), int64(10n ** 9n), int64(10n ** 9n), int64(0n), int32(0), int32(-1));
  parts.push(int32(set.bytes.length), set.bytes);
}
const RESPONSE = Buffer.concat(parts);
const PER_RESPONSE = set.records * PARTITIONS;
const ITERATIONS = Math.max(1, Math.round(TOTAL / PER_RESPONSE));
const requested = new Map(
  Array.from({ length: PARTITIONS }, (_, p) => [partitionKey(TOPIC, p), 0n] as const),
);

// ---- before: kafkajs's decoder plus onceflow's old conversion (internals.ts before the lean one) ----
const requireKafkajs = createRequire(import.meta.url);
const KafkajsDecoder = requireKafkajs("kafkajs/src/protocol/decoder") as new (
  buffer: Buffer,
) => {
  readInt16(): number;
  readInt32(): number;
  readInt64(): { toString(): string };
  readString(): string;
  readBytes(size: number): Buffer;
  canReadBytes(size: number): boolean;
  readArray<T>(read: (d: never) => T): T[];
  readArrayAsync<T>(read: (d: never) => Promise<T>): Promise<T[]>;
};
type KDecoder = InstanceType<typeof KafkajsDecoder>;
const decodeRecordBatch = requireKafkajs("kafkajs/src/protocol/recordBatch/v0/decoder") as (
  d: KDecoder,
) => Promise<{ firstOffset: string; lastOffsetDelta: number; records: DecodedMessage[] }>;

async function beforeDecode(raw: Buffer): Promise<RawRecord[][]> {
  const decoder = new KafkajsDecoder(raw);
  decoder.readInt32();
  decoder.readInt16();
  decoder.readInt32();
  const out: RawRecord[][] = [];
  await decoder.readArrayAsync(async (topicDecoder: KDecoder) => {
    const topicName = topicDecoder.readString();
    await topicDecoder.readArrayAsync(async (pd: KDecoder) => {
      const partition = pd.readInt32();
      pd.readInt16();
      pd.readInt64().toString();
      pd.readInt64().toString();
      pd.readInt64().toString();
      const abortedTransactions = pd.readArray((each: KDecoder) => ({
        producerId: each.readInt64().toString(),
        firstOffset: each.readInt64().toString(),
      }));
      pd.readInt32();
      const size = pd.readInt32();
      const buffer = pd.readBytes(size);
      const batches = new KafkajsDecoder(buffer);
      const messages: DecodedMessage[] = [];
      while (batches.canReadBytes(49)) {
        const batch = await decodeRecordBatch(batches);
        for (const record of batch.records) messages.push(record);
      }
      const fetchOffset = requested.get(partitionKey(topicName, partition)) as bigint;
      out.push(recordsFromKafkajs(messages, fetchOffset, abortedTransactions).records);
    });
  });
  return out;
}

async function afterDecode(raw: Buffer): Promise<RawRecord[][]> {
  const decoded = (await decodeFetchV11(raw, requested)) as FetchResponse;
  // Each record made as the reader makes it when handing it out (from the columns), which are then
  // recycled as the reader recycles them.
  return fetchedPartitions(decoded, requested).fetched.map((p) => {
    const records = p.records.toArray();
    p.records.release();
    return records;
  });
}

// ---- the run ----
let gcMs = 0;
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) gcMs += entry.duration;
}).observe({ entryTypes: ["gc"] });

async function measure(decode: (raw: Buffer) => Promise<RawRecord[][]>): Promise<{ ms: number; gc: number }> {
  let count = 0;
  // Each side starts with a clean heap (run with --expose-gc), not with the other's garbage.
  (globalThis as { gc?: () => void }).gc?.();
  await new Promise((resolve) => setImmediate(resolve));
  const gcBefore = gcMs;
  const start = performance.now();
  for (let i = 0; i < ITERATIONS; i++) {
    const partitions = await decode(RESPONSE);
    for (const records of partitions) count += records.length;
  }
  const ms = performance.now() - start;
  // Lets the observer see the GC entries of this run.
  await new Promise((resolve) => setImmediate(resolve));
  if (count !== ITERATIONS * PER_RESPONSE)
    throw new Error(`decoded ${count} records, expected ${ITERATIONS * PER_RESPONSE}`);
  const perMillion = 1_000_000 / count;
  return { ms: ms * perMillion, gc: (gcMs - gcBefore) * perMillion };
}

// Same output first (a cheap guard against benchmarking two different things). Compared as views:
// the two sides locate keys and values in different Buffers over the same bytes.
const [b0, a0] = [await beforeDecode(RESPONSE), await afterDecode(RESPONSE)];
const firstRecords = (partitions: RawRecord[][]) =>
  JSON.stringify(partitions[0]?.slice(0, 3).map(viewsOf), (_k, v) => (typeof v === "bigint" ? String(v) : v));
if (firstRecords(b0) !== firstRecords(a0)) {
  throw new Error("before and after decode different records");
}
const crcStart = performance.now();
for (let i = 0; i < ITERATIONS; i++) crc32c(RESPONSE);
const crcMs = ((performance.now() - crcStart) * 1_000_000) / (ITERATIONS * PER_RESPONSE);

console.log(
  `response: ${(RESPONSE.length / 1024 / 1024).toFixed(2)} MiB, ${PER_RESPONSE} records (${PARTITIONS} partitions, value ${VALUE_BYTES} B, ${HEADERS} headers), ${ITERATIONS} responses per round`,
);
console.log("round  before ms/1M (gc)   after ms/1M (gc)   before/after");
const ratios: number[] = [];
for (let round = 1; round <= ROUNDS; round++) {
  const before = await measure(beforeDecode);
  const after = await measure(afterDecode);
  ratios.push(before.ms / after.ms);
  console.log(
    `${String(round).padStart(5)}  ${before.ms.toFixed(0).padStart(8)} (${before.gc.toFixed(0).padStart(4)})   ${after.ms.toFixed(0).padStart(8)} (${after.gc.toFixed(0).padStart(4)})   ${(before.ms / after.ms).toFixed(2)}x`,
  );
}
ratios.sort((x, y) => x - y);
console.log(`median before/after: ${(ratios[Math.floor(ratios.length / 2)] as number).toFixed(2)}x`);
console.log(
  `of which CRC-32C of the whole response (lean path checks every batch): ${crcMs.toFixed(0)} ms/1M records`,
);
