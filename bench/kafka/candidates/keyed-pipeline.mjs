// The keyed pipeline of bench/kafka/compare.mts's keyed candidates, the same in one thread
// (onceflow-keyed-job.mjs) and in worker threads (onceflow-thread-job.mjs): KafkaSource (the
// record's key is the user, its Kafka timestamp the event time) → map (counts the record) →
// keyBy(user) → 1 s tumbling event-time windows → count → KafkaSink exactly-once, each count
// written as `<user> <window start> <count>` keyed by the user. BENCH_WORK=<n> gives the map n
// passes of work per record over the value (work.mjs), before the keying: the value, its last 4
// bytes replaced, travels through keyBy's exchange; the count does not read it.
// `keying` is "key-group" (keyBy: the exchange to the subtask owning the key group) or "split"
// (reinterpretAsKeyedStream: no exchange — correct here because the input is partitioned by user).
import { Deserializers, KafkaSink, KafkaSource, kafkaRecordSerializer } from "@onceflow/connector-kafka";
import { countAggregate, TumblingEventTimeWindows, WatermarkStrategy } from "@onceflow/core";
import { work, workRounds } from "./work.mjs";

/** The window size of the keyed pipeline (ms). */
export const WINDOW_MS = 1000;

/**
 * Adds the keyed pipeline to `job`. `options`: brokers, input, output, prefix (the sink's
 * transactional id prefix), keying ("key-group" | "split"), factory (false: one sink instance,
 * for a job that runs one subtask; otherwise a factory, one sink per subtask), report
 * (createReport()), Sink (the sink's class, KafkaSink or a subclass of it; default KafkaSink).
 */
export function addKeyedPipeline(job, options) {
  const { brokers, input, output, prefix, keying, report, Sink = KafkaSink } = options;
  const rounds = workRounds();
  const records = job
    .fromSource(
      new KafkaSource({
        brokers,
        topics: [input],
        startingOffsets: "earliest",
        stoppingOffsets: "latest",
        key: Deserializers.string(),
        value: Deserializers.buffer(),
        ...(process.env.BENCH_PREFETCH_BYTES
          ? { maxPrefetchBytes: Number(process.env.BENCH_PREFETCH_BYTES) }
          : {}),
      }),
      // No timestamp assigner: the Kafka record timestamps are the event times, ascending per partition.
      { uid: "in", watermarks: WatermarkStrategy.forMonotonousTimestamps() },
    )
    .map((record) => {
      report.processed();
      // Without work the record passes as it is; with it, a copy carries the worked value.
      return rounds === 0 ? record : { ...record, value: work(record.value ?? Buffer.alloc(0), rounds) };
    });
  const user = (record) => record.key ?? "";
  const keyed =
    keying === "split"
      ? records.reinterpretAsKeyedStream(user)
      : records.keyBy(user, options.serializer ? { serializer: kafkaRecordSerializer() } : {});
  const sink = () =>
    new Sink({
      brokers,
      topic: output,
      key: { serialize: (count) => count.user },
      value: { serialize: (count) => `${count.user} ${count.start} ${count.count}` },
      // Flink stamps a window's result with the window's last millisecond.
      timestamp: (count) => count.start + WINDOW_MS - 1,
      deliveryGuarantee: "exactly-once",
      transactionalIdPrefix: prefix,
      ...(process.env.BENCH_LINGER_MS ? { lingerMs: Number(process.env.BENCH_LINGER_MS) } : {}),
    });
  keyed
    .window(TumblingEventTimeWindows.of(WINDOW_MS))
    .aggregate(countAggregate(), (key, window, count) => ({ user: key, start: window.start, count }), {
      uid: "counts",
    })
    .sinkTo(options.factory === false ? sink() : sink, { uid: "out" });
}
