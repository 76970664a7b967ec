package dev.onceflow.bench;

import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;

/**
 * Kafka Streams' keyed windowed count with exactly_once_v2, one stream thread, a commit every
 * second: the input (keyed by user, partitioned by it; the Kafka timestamp is the event time) →
 * groupByKey → 1 s tumbling windows without grace → count → to, each count written as
 * {@code <user> <window start> <count>} keyed by the user. Kafka Streams emits a window's count as
 * it changes (its record cache merges the updates between commits), so the driver reads the last
 * count of each (user, window). It has no bounded mode: it reports when it processed the expected
 * records, and the driver waits until a read_committed reader sees every final count.
 */
public final class KafkaStreamsKeyedWindowCount {
  public static void main(String[] args) throws Exception {
    String brokers = args[0];
    String input = args[1];
    String output = args[2];
    long expected = Long.parseLong(args[3]);
    String applicationId = args[4];
    String stateDir = args[5];
    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "1000");
    props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
    props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
    props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
    props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(input, Consumed.with(Serdes.String(), Serdes.ByteArray()))
        .mapValues(value -> {
          PeerReport.processed();
          return value;
        })
        .groupByKey()
        .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofSeconds(1)))
        .count()
        .toStream()
        .map((window, count) ->
            KeyValue.pair(window.key(), window.key() + " " + window.window().start() + " " + count))
        .to(output, Produced.with(Serdes.String(), Serdes.String()));
    KafkaStreams streams = new KafkaStreams(builder.build(), props);
    CountDownLatch processedAll = new CountDownLatch(1);
    Thread watcher = new Thread(() -> {
      try {
        while (PeerReport.records.get() < expected) Thread.sleep(20);
        processedAll.countDown();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    });
    watcher.setDaemon(true);
    streams.start();
    watcher.start();
    processedAll.await();
    PeerReport.done();
    PeerReport.awaitStdinClose();
    streams.close();
  }
}
