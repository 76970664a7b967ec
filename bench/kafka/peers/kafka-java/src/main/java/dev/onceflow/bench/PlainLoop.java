package dev.onceflow.bench;

import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** The broker's ceiling: a plain consume → produce loop, no transactions, no group. */
public final class PlainLoop {
  public static void main(String[] args) throws Exception {
    String brokers = args[0];
    String input = args[1];
    String output = args[2];
    long expected = Long.parseLong(args[3]);
    Properties consumerProps = new Properties();
    consumerProps.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
    consumerProps.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    consumerProps.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    consumerProps.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    Properties producerProps = new Properties();
    producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
    producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    producerProps.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps);
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps)) {
      List<TopicPartition> partitions =
          consumer.partitionsFor(input).stream()
              .map(p -> new TopicPartition(input, p.partition()))
              .collect(Collectors.toList());
      consumer.assign(partitions);
      consumer.seekToBeginning(partitions);
      while (PeerReport.records.get() < expected) {
        for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
          producer.send(new ProducerRecord<>(output, record.key(), record.value()));
          PeerReport.processed();
        }
      }
      producer.flush();
      PeerReport.done();
      PeerReport.awaitStdinClose();
    }
  }
}
