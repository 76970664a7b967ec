package dev.onceflow.bench;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The exactly-once ceiling of the broker: a plain transactional consume → produce loop with the
 * Kafka Java client and nothing else. A read_committed consumer (assigned every partition of the
 * input, from the earliest offset), a transactional producer; every BENCH_COMMIT_INTERVAL_MS
 * (default 50) it adds the consumed offsets to the transaction (sendOffsetsToTransaction) and
 * commits it. No state, no checkpoint storage: what any exactly-once pipeline on this broker pays
 * at least. Runs until stdin closes, then commits what it has, prints
 * {"event":"phases","commits":n,"commit":{"p50":…,"p99":…}} (ms a commit took) and exits.
 *
 *   java … dev.onceflow.bench.TransactionalLoop <brokers> <input> <output> <transactional id> <group id>
 */
public final class TransactionalLoop {
  public static void main(String[] args) throws Exception {
    String brokers = args[0];
    String input = args[1];
    String output = args[2];
    String transactionalId = args[3];
    String groupId = args[4];
    String interval = System.getenv("BENCH_COMMIT_INTERVAL_MS");
    long intervalMs = Long.parseLong(interval == null ? "50" : interval);
    Properties consumerProps = new Properties();
    consumerProps.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
    consumerProps.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
    consumerProps.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    consumerProps.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    consumerProps.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    consumerProps.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    consumerProps.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    Properties producerProps = new Properties();
    producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
    producerProps.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
    producerProps.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    producerProps.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    Thread stdinWatcher = new Thread(() -> {
      try {
        PeerReport.awaitStdinClose();
      } catch (Exception ignored) {
        // Stops either way.
      }
      stopping = true;
    });
    stdinWatcher.setDaemon(true);
    stdinWatcher.start();
    List<Double> commitMs = new ArrayList<>();
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps);
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps)) {
      List<TopicPartition> partitions =
          consumer.partitionsFor(input).stream()
              .map(p -> new TopicPartition(input, p.partition()))
              .collect(Collectors.toList());
      consumer.assign(partitions);
      producer.initTransactions();
      producer.beginTransaction();
      Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
      long lastCommit = System.nanoTime();
      while (!stopping) {
        ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(5));
        for (ConsumerRecord<byte[], byte[]> record : records) {
          producer.send(new ProducerRecord<>(output, record.partition(), record.key(), record.value()));
          offsets.put(
              new TopicPartition(record.topic(), record.partition()),
              new OffsetAndMetadata(record.offset() + 1));
          PeerReport.processed();
        }
        if (System.nanoTime() - lastCommit >= intervalMs * 1_000_000L) {
          lastCommit = System.nanoTime();
          if (!offsets.isEmpty()) {
            producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
            producer.commitTransaction();
            commitMs.add((System.nanoTime() - lastCommit) / 1e6);
            offsets = new HashMap<>();
            producer.beginTransaction();
          }
        }
      }
      if (!offsets.isEmpty()) producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
      producer.commitTransaction();
    }
    Collections.sort(commitMs);
    System.out.println(
        "{\"event\":\"phases\",\"commits\":" + commitMs.size()
            + ",\"commit\":{\"p50\":" + percentile(commitMs, 50) + ",\"p99\":" + percentile(commitMs, 99) + "}}");
    System.out.flush();
  }

  private static volatile boolean stopping = false;

  private static double percentile(List<Double> sorted, int p) {
    if (sorted.isEmpty()) return 0;
    double value = sorted.get(Math.min(sorted.size() - 1, (int) Math.floor(p / 100.0 * sorted.size())));
    return Math.round(value * 10) / 10.0;
  }
}
