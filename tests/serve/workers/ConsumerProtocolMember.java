// A member of a consumer group on Kafka's own Java consumer (kafka-clients 4.x) with
// group.protocol=consumer (KIP-848), for tests/serve/test_consumer_protocol_clients.py: it prints
// the lines serve.workers.modern reads, the same ones serve/workers/consumer_protocol.py prints
// for librdkafka. Arguments: BOOTSTRAP GROUP NAME TOPIC INSTANCE-ID|- REMOTE-ASSIGNOR|-.
// SIGTERM (a JVM shutdown hook) commits, leaves the group (close()) and prints "closed".

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ConsumerProtocolMember {
    static final TreeSet<Integer> owned = new TreeSet<>();
    static final Map<Integer, Long> pending = new TreeMap<>();
    static String topic;
    static KafkaConsumer<byte[], byte[]> consumer;

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static void showOwned() {
        StringBuilder line = new StringBuilder("assigned ").append(System.currentTimeMillis());
        for (int p : owned) line.append(' ').append(topic).append(':').append(p);
        say(line.toString());
    }

    static String error(Exception e) {
        String text = String.valueOf(e.getMessage()).replaceAll("\\s+", " ").trim();
        return e.getClass().getSimpleName() + ":" + text;
    }

    /** Commit what was read of ``partitions`` (all owned ones when null), synchronously. */
    static void commit(Collection<Integer> partitions) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new TreeMap<>(
                (a, b) -> Integer.compare(a.partition(), b.partition()));
        for (Map.Entry<Integer, Long> e : pending.entrySet()) {
            if (owned.contains(e.getKey()) && (partitions == null || partitions.contains(e.getKey())))
                offsets.put(new TopicPartition(topic, e.getKey()), new OffsetAndMetadata(e.getValue()));
        }
        if (offsets.isEmpty()) return;
        try {
            consumer.commitSync(offsets, Duration.ofSeconds(30));
        } catch (WakeupException e) {
            throw e;
        } catch (Exception e) {
            say("commit-failed " + error(e));
            return;
        }
        StringBuilder line = new StringBuilder("committed");
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            int p = e.getKey().partition();
            long next = e.getValue().offset();
            if (pending.get(p) != null && pending.get(p) == next) pending.remove(p);
            line.append(' ').append(p).append(':').append(next);
        }
        say(line.toString());
    }

    public static void main(String[] args) throws Exception {
        topic = args[3];
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, args[2]);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        if (!args[4].equals("-")) props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, args[4]);
        if (!args[5].equals("-")) props.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, args[5]);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        // Moved leaders and coordinators are found at once; a dead broker is retried quickly.
        props.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "1000");
        props.put(ConsumerConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        props.put(ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000");
        props.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, "10000");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        consumer = new KafkaConsumer<>(props);

        AtomicBoolean stop = new AtomicBoolean(false);
        CountDownLatch done = new CountDownLatch(1);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stop.set(true);
            consumer.wakeup();
            try {
                done.await();
                main.join(60_000);
            } catch (InterruptedException ignored) {
            }
        }));

        consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            // KIP-848 rebalances incrementally: only what moves is revoked or assigned. What was
            // read of a revoked partition is committed before it is given up (Kafka's advice), so
            // its next owner starts after it.
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
                List<Integer> parts = new ArrayList<>();
                for (TopicPartition tp : revoked) parts.add(tp.partition());
                commit(parts);
                drop(parts);
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> lost) {
                List<Integer> parts = new ArrayList<>();
                for (TopicPartition tp : lost) parts.add(tp.partition());
                drop(parts);
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> assigned) {
                for (TopicPartition tp : assigned) owned.add(tp.partition());
                showOwned();
            }

            void drop(List<Integer> parts) {
                for (int p : parts) {
                    owned.remove(p);
                    pending.remove(p);
                }
                showOwned();
            }
        });
        try {
            while (!stop.get()) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    say("record " + r.partition() + " " + r.offset() + " " + new String(r.value()));
                    pending.put(r.partition(), r.offset() + 1);
                }
                commit(null);
            }
        } catch (WakeupException e) {
            // SIGTERM: fall through to the last commit and the leave.
        }
        try {
            commit(null);
        } catch (WakeupException e) {
            commit(null); // the wakeup came after the last poll: it ended this commit instead
        }
        consumer.close(); // commits nothing more (auto-commit is off); revokes, then leaves
        say("closed");
        done.countDown();
    }
}
