import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Writes the records read from standard input (one JSON object a line: {"key", "value",
 * "partition", "timestamp", "headers": [[name, value], ...]}, strings as UTF-8, null kept) with
 * the given producer settings, and prints one line per record: {"partition", "offset"}. With a
 * `transactional.id` setting every record goes in one committed transaction.
 * java -cp "<kafka libs>/*" JavaProducer.java <brokers> <topic> [setting=value ...]
 */
public final class JavaProducer {
  public static void main(String[] args) throws Exception {
    Properties props = new Properties();
    props.put("bootstrap.servers", args[0]);
    props.put("key.serializer", ByteArraySerializer.class.getName());
    props.put("value.serializer", ByteArraySerializer.class.getName());
    for (int i = 2; i < args.length; i++) {
      int eq = args[i].indexOf('=');
      props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
    }
    String topic = args[1];
    ObjectMapper json = new ObjectMapper();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    boolean transactional = props.containsKey("transactional.id");
    List<Future<RecordMetadata>> sent = new ArrayList<>();
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
      if (transactional) {
        producer.initTransactions();
        producer.beginTransaction();
      }
      for (String line = in.readLine(); line != null; line = in.readLine()) {
        if (line.isBlank()) continue;
        JsonNode record = json.readTree(line);
        ProducerRecord<byte[], byte[]> out = new ProducerRecord<>(
            topic,
            record.hasNonNull("partition") ? record.get("partition").asInt() : null,
            record.hasNonNull("timestamp") ? record.get("timestamp").asLong() : null,
            bytes(record.get("key")),
            bytes(record.get("value")));
        JsonNode headers = record.get("headers");
        if (headers != null) {
          for (JsonNode header : headers) out.headers().add(new RecordHeader(header.get(0).asText(), bytes(header.get(1))));
        }
        sent.add(producer.send(out));
      }
      if (transactional) producer.commitTransaction();
      producer.flush();
      for (Future<RecordMetadata> result : sent) {
        RecordMetadata metadata = result.get();
        System.out.println("{\"partition\":" + metadata.partition() + ",\"offset\":" + metadata.offset() + "}");
      }
    }
  }

  private static byte[] bytes(JsonNode node) {
    return node == null || node.isNull() ? null : node.asText().getBytes(StandardCharsets.UTF_8);
  }
}
