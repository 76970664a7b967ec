package dev.onceflow.bench;

import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.format.Json;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Debezium's PostgreSQL connector in the embedded engine: the changes of one table, read over an
 * existing replication slot and publication (pgoutput), each change event sent to a Kafka topic
 * keyed by the row's key, as Debezium Server's Kafka sink does. Each batch is flushed before the
 * engine may commit its offsets (at-least-once, Debezium's guarantee). Runs until killed.
 *
 * <p>Arguments: pg-host pg-port pg-user pg-database table slot publication brokers topic offsets-file
 */
public final class DebeziumToKafka {
  public static void main(String[] args) throws Exception {
    if (args.length != 10) {
      System.err.println(
          "usage: pg-host pg-port pg-user pg-database table slot publication brokers topic offsets-file");
      System.exit(2);
    }
    String topic = args[8];
    Properties producerProps = new Properties();
    producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[7]);
    producerProps.put(ProducerConfig.ACKS_CONFIG, "all");
    producerProps.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps);

    Properties props = new Properties();
    props.setProperty("name", "onceflow-bench");
    props.setProperty("connector.class", "io.debezium.connector.postgresql.PostgresConnector");
    props.setProperty("offset.storage", "org.apache.kafka.connect.storage.FileOffsetBackingStore");
    props.setProperty("offset.storage.file.filename", args[9]);
    props.setProperty("offset.flush.interval.ms", "1000");
    props.setProperty("database.hostname", args[0]);
    props.setProperty("database.port", args[1]);
    props.setProperty("database.user", args[2]);
    props.setProperty("database.password", "");
    props.setProperty("database.dbname", args[3]);
    props.setProperty("topic.prefix", "bench");
    props.setProperty("plugin.name", "pgoutput");
    props.setProperty("slot.name", args[5]);
    props.setProperty("publication.name", args[6]);
    props.setProperty("publication.autocreate.mode", "disabled");
    props.setProperty("table.include.list", args[4]);
    props.setProperty("snapshot.mode", "no_data");
    props.setProperty("max.batch.size", "2048");
    props.setProperty("max.queue.size", "16384");
    props.setProperty("poll.interval.ms", "50");
    props.setProperty("converter.schemas.enable", "false");

    DebeziumEngine<ChangeEvent<String, String>> engine =
        DebeziumEngine.create(Json.class)
            .using(props)
            .notifying(
                (records, committer) -> {
                  for (ChangeEvent<String, String> record : records) {
                    if (record.value() != null)
                      producer.send(new ProducerRecord<>(topic, record.key(), record.value()));
                    committer.markProcessed(record);
                  }
                  producer.flush();
                  committer.markBatchFinished();
                })
            .using(
                (success, message, error) -> {
                  if (!success) {
                    System.err.println("engine stopped: " + message);
                    if (error != null) error.printStackTrace();
                    System.exit(1);
                  }
                })
            .build();
    ExecutorService executor = Executors.newSingleThreadExecutor();
    executor.execute(engine);
    System.out.println("STARTED");
    System.out.flush();
  }
}
