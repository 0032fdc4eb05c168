// A share-group member on Kafka's own Java KafkaShareConsumer (kafka-clients 4.4), explicit
// acknowledgements, for tests/share/test_share_partitions_clients.py: it prints the JSON lines
// share_member.py prints for librdkafka (each record once its acknowledgement was committed). Arguments: BOOTSTRAP GROUP TOPIC POLICY (accept,
// triage or hold, as share_member.py). SIGTERM (a JVM shutdown hook) commits, closes (leaves the
// group) and prints {"event": "closed"}.

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareMember {
    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static String quoted(String text) {
        return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2], policy = args[3];
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("share.acknowledgement.mode", "explicit");
        KafkaShareConsumer<String, String> consumer =
            new KafkaShareConsumer<>(props, new StringDeserializer(), new StringDeserializer());
        AtomicBoolean stopping = new AtomicBoolean(false);
        CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopping.set(true);
            consumer.wakeup();
            try {
                done.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        try {
            consumer.subscribe(List.of(topic));
            say("{\"event\": \"subscribed\"}");
            while (!stopping.get()) {
                ConsumerRecords<String, String> records;
                try {
                    records = consumer.poll(Duration.ofMillis(500));
                } catch (WakeupException e) {
                    break;
                }
                List<String> got = new ArrayList<>();
                List<Integer> partitions = new ArrayList<>();
                for (ConsumerRecord<String, String> record : records) {
                    String value = record.value() == null ? "" : record.value();
                    String ack;
                    AcknowledgeType kind;
                    if (policy.equals("hold")) {
                        ack = "none";
                        kind = null;
                    } else if (policy.equals("triage") && value.startsWith("rej")) {
                        ack = "reject";
                        kind = AcknowledgeType.REJECT;
                    } else if (policy.equals("triage") && value.startsWith("rel")) {
                        ack = "release";
                        kind = AcknowledgeType.RELEASE;
                    } else {
                        ack = "accept";
                        kind = AcknowledgeType.ACCEPT;
                    }
                    int delivery = record.deliveryCount().map(Short::intValue).orElse(-1);
                    got.add("{\"event\": \"record\", \"partition\": " + record.partition()
                        + ", \"offset\": " + record.offset() + ", \"delivery\": " + delivery
                        + ", \"value\": " + quoted(value) + ", \"ack\": " + quoted(ack)
                        + ", \"committed\": ");
                    partitions.add(record.partition());
                    if (kind != null) consumer.acknowledge(record, kind);
                }
                if (!got.isEmpty() && policy.equals("hold")) {
                    for (String line : got) say(line + "false}");
                    say("{\"event\": \"holding\"}");
                    while (!stopping.get()) Thread.sleep(100);
                    break;
                }
                if (!got.isEmpty()) {
                    Map<TopicIdPartition, Optional<KafkaException>> results;
                    try {
                        results = consumer.commitSync();
                    } catch (WakeupException e) {
                        break;
                    }
                    // What the broker made of each partition's acknowledgements.
                    Set<Integer> failed = new HashSet<>();
                    for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : results.entrySet()) {
                        if (e.getValue().isPresent()) failed.add(e.getKey().partition());
                    }
                    for (int i = 0; i < got.size(); i++) {
                        say(got.get(i) + (failed.contains(partitions.get(i)) ? "false}" : "true}"));
                    }
                }
            }
        } finally {
            if (!policy.equals("hold")) consumer.close();
            say("{\"event\": \"closed\"}");
            done.countDown();
        }
    }
}
