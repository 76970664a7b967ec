import type { KafkaPartitionSplit, KafkaRecord, KafkaSource } from "@onceflow/connector-kafka";
import type { SourceReaderContext } from "@onceflow/core";
import { readerContext } from "./kafka.js";

type AnySource = KafkaSource<unknown, unknown, unknown>;
type Reader = ReturnType<AnySource["createReader"]>;

/** Opens a reader by hand, as the runtime does: discover, keep this subtask's splits, add them. */
export async function openReader<K, V, H>(
  source: KafkaSource<K, V, H>,
  options: { restored?: KafkaPartitionSplit[]; context?: Partial<SourceReaderContext> } = {},
) {
  const { context, metrics, logger } = readerContext(options.context);
  const discovered = await source.discoverSplits({
    jobId: context.jobId,
    parallelism: context.parallelism,
    logger,
  });
  const mine = discovered.filter((s) => source.assignSplit(s, context.parallelism) === context.subtaskIndex);
  const restoredIds = new Set((options.restored ?? []).map((s) => s.splitId));
  const reader = source.createReader(context);
  await reader.addSplits([...(options.restored ?? []), ...mine.filter((s) => !restoredIds.has(s.splitId))]);
  await reader.start?.();
  return { reader, metrics, logger };
}

/** Polls until `count` records arrived (or the reader finished), failing after `timeoutMs`. */
export async function pollRecords<K, V, H>(
  reader: { pollNext: Reader["pollNext"]; isAvailable(): Promise<void>; isFinished(): boolean },
  count: number,
  timeoutMs = 15_000,
): Promise<Array<KafkaRecord<K, V, H> & { eventTime: number | undefined }>> {
  const out: Array<KafkaRecord<K, V, H> & { eventTime: number | undefined }> = [];
  const deadline = Date.now() + timeoutMs;
  while (out.length < count && !reader.isFinished()) {
    if (Date.now() > deadline) throw new Error(`timed out with ${out.length} of ${count} records`);
    const batch = await reader.pollNext();
    if (batch === undefined) {
      await Promise.race([reader.isAvailable(), new Promise((r) => setTimeout(r, 100))]);
      continue;
    }
    batch.records.forEach((record, i) => {
      out.push({ ...(record as KafkaRecord<K, V, H>), eventTime: batch.timestamps?.[i] });
    });
  }
  return out;
}

/** Polls for `ms` and returns whatever arrived (to show that nothing more comes). */
export async function pollFor<K, V, H>(
  reader: { pollNext: Reader["pollNext"]; isAvailable(): Promise<void>; isFinished(): boolean },
  ms: number,
): Promise<KafkaRecord<K, V, H>[]> {
  const out: KafkaRecord<K, V, H>[] = [];
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const batch = await reader.pollNext();
    if (batch === undefined) {
      await Promise.race([reader.isAvailable(), new Promise((r) => setTimeout(r, 50))]);
      continue;
    }
    out.push(...(batch.records as KafkaRecord<K, V, H>[]));
  }
  return out;
}
