package dev.onceflow.bench;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * Flink's keyed windowed count in a local MiniCluster, parallelism 1 (or the fifth argument),
 * checkpoints every second: KafkaSource (the record key is the user, the Kafka timestamp the event
 * time) → keyBy(user) → 1 s tumbling event-time windows → count → KafkaSink with EXACTLY_ONCE,
 * each count written as {@code <user> <window start> <count>} keyed by the user. The source is
 * bounded at the latest offsets: at its end the final watermark fires every window, and a final
 * checkpoint commits the last transaction.
 */
public final class FlinkKeyedWindowCount {
  /** Counts the records of a window. */
  static final class Count implements AggregateFunction<String, Long, Long> {
    @Override
    public Long createAccumulator() {
      return 0L;
    }

    @Override
    public Long add(String value, Long accumulator) {
      return accumulator + 1;
    }

    @Override
    public Long getResult(Long accumulator) {
      return accumulator;
    }

    @Override
    public Long merge(Long a, Long b) {
      return a + b;
    }
  }

  /** Writes a window's count with its key and start. */
  static final class Format extends ProcessWindowFunction<Long, String, String, TimeWindow> {
    @Override
    public void process(String user, Context context, Iterable<Long> counts, Collector<String> out) {
      out.collect(user + " " + context.window().getStart() + " " + counts.iterator().next());
    }
  }

  public static void main(String[] args) throws Exception {
    String brokers = args[0];
    String input = args[1];
    String output = args[2];
    String transactionalIdPrefix = args[3];
    int parallelism = args.length > 4 ? Integer.parseInt(args[4]) : 1;
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(new Configuration());
    env.setParallelism(parallelism);
    env.enableCheckpointing(1000);
    KafkaSource<String> source =
        KafkaSource.<String>builder()
            .setBootstrapServers(brokers)
            .setTopics(input)
            .setGroupId(transactionalIdPrefix)
            .setStartingOffsets(OffsetsInitializer.earliest())
            .setBounded(OffsetsInitializer.latest())
            .setDeserializer(
                new KafkaRecordDeserializationSchema<String>() {
                  @Override
                  public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<String> out) {
                    out.collect(new String(record.key(), StandardCharsets.UTF_8));
                  }

                  @Override
                  public TypeInformation<String> getProducedType() {
                    return Types.STRING;
                  }
                })
            .build();
    Properties producerProps = new Properties();
    producerProps.put("transaction.timeout.ms", "60000");
    KafkaSink<String> sink =
        KafkaSink.<String>builder()
            .setBootstrapServers(brokers)
            .setRecordSerializer(
                (KafkaRecordSerializationSchema<String>)
                    (line, context, timestamp) ->
                        new ProducerRecord<>(
                            output,
                            line.substring(0, line.indexOf(' ')).getBytes(StandardCharsets.UTF_8),
                            line.getBytes(StandardCharsets.UTF_8)))
            .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
            .setTransactionalIdPrefix(transactionalIdPrefix)
            .setKafkaProducerConfig(producerProps)
            .build();
    // The Kafka record timestamps are the event times (the source attaches them), ascending per partition.
    env.fromSource(source, WatermarkStrategy.<String>forMonotonousTimestamps(), "in")
        .map(user -> {
          PeerReport.processed();
          return user;
        })
        .returns(Types.STRING)
        .keyBy(user -> user)
        .window(TumblingEventTimeWindows.of(Duration.ofSeconds(1)))
        .aggregate(new Count(), new Format())
        .sinkTo(sink);
    env.execute("onceflow-bench-flink-keyed");
    PeerReport.done();
    PeerReport.awaitStdinClose();
  }
}
