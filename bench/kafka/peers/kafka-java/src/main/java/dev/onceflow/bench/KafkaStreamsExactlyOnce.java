package dev.onceflow.bench;

import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Kafka Streams with exactly_once_v2, one stream thread, a commit every second
 * (BENCH_COMMIT_INTERVAL_MS in the environment sets another interval). It has no bounded mode: it
 * reports when it processed the expected records, and the driver waits until a read_committed
 * reader sees them all before it reads this process's CPU time.
 */
public final class KafkaStreamsExactlyOnce {
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
    String interval = System.getenv("BENCH_COMMIT_INTERVAL_MS");
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, interval == null ? "1000" : interval);
    props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
    props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
    props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(input, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
        .mapValues(value -> {
          PeerReport.processed();
          return value;
        })
        .to(output, Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));
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
