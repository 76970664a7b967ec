import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Reads every partition of a topic from its beginning up to its end as of the start (the last
 * stable offset: isolation.level is read_committed unless a setting says otherwise), without a
 * consumer group, and prints each record as one JSON line: {"partition", "offset", "timestamp",
 * "key", "value", "headers": [[name, value], ...]} (strings as UTF-8, null kept). With
 * `--timings` it prints only one line at the end: {"records", "bytes", "nanos"} of the poll loop.
 * java -cp "<kafka libs>/*" JavaConsumer.java <brokers> <topic> [--timings] [setting=value ...]
 */
public final class JavaConsumer {
  public static void main(String[] args) throws Exception {
    Properties props = new Properties();
    props.put("bootstrap.servers", args[0]);
    props.put("key.deserializer", ByteArrayDeserializer.class.getName());
    props.put("value.deserializer", ByteArrayDeserializer.class.getName());
    props.put("isolation.level", "read_committed");
    props.put("enable.auto.commit", "false");
    boolean timings = false;
    for (int i = 2; i < args.length; i++) {
      if (args[i].equals("--timings")) {
        timings = true;
        continue;
      }
      int eq = args[i].indexOf('=');
      props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
    }
    String topic = args[1];
    ObjectMapper json = new ObjectMapper();
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      List<TopicPartition> partitions = new ArrayList<>();
      for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
        partitions.add(new TopicPartition(topic, info.partition()));
      }
      consumer.assign(partitions);
      consumer.seekToBeginning(partitions);
      Map<TopicPartition, Long> end = consumer.endOffsets(partitions, Duration.ofSeconds(30));
      long records = 0;
      long bytes = 0;
      long started = System.nanoTime();
      long deadline = started + Duration.ofSeconds(120).toNanos();
      while (!reachedEnd(consumer, partitions, end)) {
        if (System.nanoTime() > deadline) throw new IllegalStateException("the end offsets " + end + " were not reached in 120 s");
        for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
          records++;
          bytes += record.serializedValueSize() + Math.max(0, record.serializedKeySize());
          if (timings) continue;
          ObjectNode line = json.createObjectNode();
          line.put("partition", record.partition());
          line.put("offset", record.offset());
          line.put("timestamp", record.timestamp());
          line.put("key", text(record.key()));
          line.put("value", text(record.value()));
          ArrayNode headers = line.putArray("headers");
          for (Header header : record.headers()) headers.addArray().add(header.key()).add(text(header.value()));
          System.out.println(json.writeValueAsString(line));
        }
      }
      long nanos = System.nanoTime() - started;
      if (timings) System.out.println("{\"records\":" + records + ",\"bytes\":" + bytes + ",\"nanos\":" + nanos + "}");
    }
  }

  private static boolean reachedEnd(KafkaConsumer<byte[], byte[]> consumer, List<TopicPartition> partitions, Map<TopicPartition, Long> end) {
    for (TopicPartition partition : partitions) {
      if (consumer.position(partition) < end.get(partition)) return false;
    }
    return true;
  }

  private static String text(byte[] bytes) {
    return bytes == null ? null : new String(bytes, StandardCharsets.UTF_8);
  }
}
