package dev.onceflow.bench;

import java.util.Properties;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.KafkaSourceBuilder;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Flink's KafkaSource → KafkaSink with EXACTLY_ONCE in a local MiniCluster, parallelism 1,
 * checkpoints every second (BENCH_CHECKPOINT_INTERVAL_MS in the environment sets another interval).
 * The source is bounded at the latest offsets, so the job ends after a final checkpoint that commits
 * the last transaction; with BENCH_UNBOUNDED=1 it reads on until stdin closes (latency runs).
 */
public final class FlinkExactlyOnce {
  public static void main(String[] args) throws Exception {
    String brokers = args[0];
    String input = args[1];
    String output = args[2];
    String transactionalIdPrefix = args[3];
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(new Configuration());
    env.setParallelism(1);
    String interval = System.getenv("BENCH_CHECKPOINT_INTERVAL_MS");
    env.enableCheckpointing(interval == null ? 1000 : Long.parseLong(interval));
    boolean unbounded = "1".equals(System.getenv("BENCH_UNBOUNDED"));
    KafkaSourceBuilder<byte[]> sourceBuilder =
        KafkaSource.<byte[]>builder()
            .setBootstrapServers(brokers)
            .setTopics(input)
            .setGroupId(transactionalIdPrefix)
            .setStartingOffsets(OffsetsInitializer.earliest())
            .setDeserializer(KafkaRecordDeserializationSchema.valueOnly(ByteArrayDeserializer.class));
    if (!unbounded) sourceBuilder.setBounded(OffsetsInitializer.latest());
    KafkaSource<byte[]> source = sourceBuilder.build();
    Properties producerProps = new Properties();
    producerProps.put("transaction.timeout.ms", "60000");
    KafkaSink<byte[]> sink =
        KafkaSink.<byte[]>builder()
            .setBootstrapServers(brokers)
            .setRecordSerializer(
                (KafkaRecordSerializationSchema<byte[]>)
                    (element, context, timestamp) -> new ProducerRecord<>(output, element))
            .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
            .setTransactionalIdPrefix(transactionalIdPrefix)
            .setKafkaProducerConfig(producerProps)
            .build();
    env.fromSource(source, WatermarkStrategy.noWatermarks(), "in")
        .map(value -> {
          PeerReport.processed();
          return value;
        })
        .returns(byte[].class)
        .sinkTo(sink);
    if (unbounded) {
      env.executeAsync("onceflow-bench-flink");
      PeerReport.awaitStdinClose();
      System.exit(0);
    }
    env.execute("onceflow-bench-flink");
    PeerReport.done();
    PeerReport.awaitStdinClose();
  }
}
