import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;

/**
 * Prints {"bytes": N}: the size of a topic's log on the brokers (every partition and replica), as
 * the Java AdminClient's describeLogDirs reports it: what the records take as stored, compressed
 * or not.
 * java -cp "<kafka libs>/*" JavaTopicBytes.java <brokers> <topic>
 */
public final class JavaTopicBytes {
  public static void main(String[] args) throws Exception {
    Properties props = new Properties();
    props.put("bootstrap.servers", args[0]);
    try (Admin admin = Admin.create(props)) {
      List<Integer> brokers = new ArrayList<>();
      for (Node node : admin.describeCluster().nodes().get()) brokers.add(node.id());
      long bytes = 0;
      for (Map<String, LogDirDescription> dirs : admin.describeLogDirs(brokers).allDescriptions().get().values()) {
        for (LogDirDescription dir : dirs.values()) {
          for (Map.Entry<TopicPartition, ReplicaInfo> replica : dir.replicaInfos().entrySet()) {
            if (replica.getKey().topic().equals(args[1])) bytes += replica.getValue().size();
          }
        }
      }
      System.out.println("{\"bytes\":" + bytes + "}");
    }
  }
}
