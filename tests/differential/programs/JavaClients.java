// Kafka's own Java clients (kafka-clients from the fetched 4.4 jars) play the client recording of
// issue #31 against one cluster and print what they observed as one JSON object on standard output.
// Run as a single source file: java -cp <the jars> JavaClients.java <bootstrap> <name prefix>
// The steps and their keys are the same in every program of this folder (see
// tests/differential/test_client_recordings.py).

import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class JavaClients {
    static final long WAIT_MS = 60_000;
    static final Map<String, Object> RECORDING = new LinkedHashMap<>();
    static String bootstrap;
    static String prefix;

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: JavaClients.java <bootstrap servers> <name prefix>");
            System.exit(2);
        }
        bootstrap = args[0];
        prefix = args[1];
        String topic = prefix + "-a";
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            topics(admin, topic);
            produce(topic);
            RECORDING.put("max_timestamps", outcome(() -> maxTimestamps(admin, topic)));
            groups(admin, topic);
            // At the end, when every broker has long known the topic.
            RECORDING.put("list", outcome(() -> admin.listTopics().names().get().stream()
                    .filter(n -> n.startsWith(prefix)).sorted().toList()));
            RECORDING.put("describe", outcome(() -> describe(admin, topic)));
        }
        System.out.println(new ObjectMapper().writeValueAsString(RECORDING));
    }

    /** What a call returned, or the simple name of what it raised (its cause, for a future). */
    static Object outcome(Callable<Object> call) {
        try {
            return call.call();
        } catch (ExecutionException e) {
            return Map.of("error", e.getCause().getClass().getSimpleName());
        } catch (Exception e) {
            return Map.of("error", e.getClass().getSimpleName());
        }
    }

    static void topics(Admin admin, String topic) {
        RECORDING.put("create", outcome(() -> {
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 2))).all().get();
            return "ok";
        }));
        RECORDING.put("create_existing", outcome(() -> {
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 2))).all().get();
            return "ok";
        }));
        RECORDING.put("create_replication_above_brokers", outcome(() -> {
            admin.createTopics(List.of(new NewTopic(prefix + "-rf", 1, (short) 4))).all().get();
            return "ok";
        }));
        RECORDING.put("partitions_decreased", outcome(() -> {
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(2))).all().get();
            return "ok";
        }));
        RECORDING.put("partitions_increased", outcome(() -> {
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all().get();
            return "ok";
        }));
        // A Kafka broker learns of new partitions a little after the controller: 3 answers in a row.
        int[] streak = {0};
        waitUntil(() -> (streak[0] = partitionCount(admin, topic) == 4 ? streak[0] + 1 : 0) >= 3,
                "4 partitions of " + topic);
        RECORDING.put("describe_missing", outcome(() -> describe(admin, prefix + "-unknown")));
        RECORDING.put("delete_missing", outcome(() -> {
            admin.deleteTopics(List.of(prefix + "-missing")).all().get();
            return "ok";
        }));
    }

    static int partitionCount(Admin admin, String topic) {
        try {
            return admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
        } catch (Exception e) {
            return -1;
        }
    }

    /** Per partition: replica and ISR counts and whether the leader is a replica (not ids). */
    static Object describe(Admin admin, String topic) throws Exception {
        TopicDescription description = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        List<Object> partitions = new ArrayList<>();
        for (TopicPartitionInfo info : description.partitions()) {
            Map<String, Object> partition = new LinkedHashMap<>();
            partition.put("partition", info.partition());
            partition.put("replicas", info.replicas().size());
            partition.put("isr", info.isr().size());
            partition.put("leader_is_replica", info.replicas().contains(info.leader()));
            partitions.add(partition);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("internal", description.isInternal());
        out.put("partitions", partitions);
        return out;
    }

    static Properties clientProperties() {
        Properties properties = new Properties();
        properties.put("bootstrap.servers", bootstrap);
        return properties;
    }

    static void produce(String topic) {
        Properties properties = clientProperties();
        properties.put(ProducerConfig.ACKS_CONFIG, "all");
        properties.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        try (KafkaProducer<String, String> producer =
                new KafkaProducer<>(properties, new StringSerializer(), new StringSerializer())) {
            List<Object> offsets = new ArrayList<>();
            int[] counts = {5, 3, 0, 2};
            for (int partition = 0; partition < counts.length; partition++) {
                for (int i = 0; i < counts[partition]; i++) {
                    String key = "k" + i;
                    long at = timestamp(partition, i);
                    String value = "v" + partition + "-" + i;
                    int p = partition;
                    offsets.add(outcome(() -> {
                        RecordMetadata sent = producer.send(
                                new ProducerRecord<>(topic, p, at, key, value)).get();
                        return List.of(sent.partition(), sent.offset());
                    }));
                }
            }
            RECORDING.put("produced", offsets);
            // The brokers create a topic on a producer's first metadata request (the Java
            // producer always allows it).
            RECORDING.put("produce_unknown_topic", outcome(() -> {
                RecordMetadata sent = producer.send(new ProducerRecord<>(prefix + "-auto", "k", "v")).get();
                return List.of(sent.partition(), sent.offset());
            }));
        }
        try (KafkaConsumer<String, String> consumer = consumer(null, "watermarks")) {
            List<TopicPartition> partitions = partitions(topic, 4);
            Map<TopicPartition, Long> low = consumer.beginningOffsets(partitions);
            Map<TopicPartition, Long> high = consumer.endOffsets(partitions);
            Map<String, Object> watermarks = new TreeMap<>();
            for (TopicPartition tp : partitions) {
                watermarks.put(String.valueOf(tp.partition()), List.of(low.get(tp), high.get(tp)));
            }
            RECORDING.put("watermarks", watermarks);
            // ListOffsets by timestamp: the first record at or after the third one's (none in
            // the empty partition, nor past the last of partition 3).
            Map<TopicPartition, Long> times = new LinkedHashMap<>();
            for (TopicPartition tp : partitions) {
                times.put(tp, timestamp(tp.partition(), 2));
            }
            Map<String, Object> found = new TreeMap<>();
            consumer.offsetsForTimes(times).forEach((tp, at) -> found.put(String.valueOf(tp.partition()),
                    at == null ? null : List.of(at.offset(), at.timestamp())));
            RECORDING.put("offsets_for_times", found);
        }
    }

    /** ListOffsets for the max timestamp (KIP-734): each partition's latest record by time. */
    static Object maxTimestamps(Admin admin, String topic) throws Exception {
        Map<TopicPartition, OffsetSpec> asked = new LinkedHashMap<>();
        for (TopicPartition tp : partitions(topic, 4)) {
            asked.put(tp, OffsetSpec.maxTimestamp());
        }
        Map<String, Object> found = new TreeMap<>();
        admin.listOffsets(asked).all().get().forEach((tp, info) -> found.put(
                String.valueOf(tp.partition()), List.of(info.offset(), info.timestamp())));
        return found;
    }

    /** The create time the producer gives the record: fixed, so that both clusters store it. */
    static long timestamp(int partition, int index) {
        return 1_700_000_000_000L + partition * 1000L + index;
    }

    static List<TopicPartition> partitions(String topic, int count) {
        List<TopicPartition> partitions = new ArrayList<>();
        for (int p = 0; p < count; p++) {
            partitions.add(new TopicPartition(topic, p));
        }
        return partitions;
    }

    static KafkaConsumer<String, String> consumer(String group, String clientId) {
        Properties properties = clientProperties();
        properties.put(ConsumerConfig.CLIENT_ID_CONFIG, prefix + "-" + clientId);
        if (group != null) {
            properties.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        properties.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        properties.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        properties.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        properties.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        properties.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                "org.apache.kafka.clients.consumer.RangeAssignor");
        return new KafkaConsumer<>(properties, new StringDeserializer(), new StringDeserializer());
    }

    static void waitUntil(BooleanSupplier condition, String what) {
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (!condition.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("gave up waiting for " + what);
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        }
    }

    /** A group member: its consumer and the values it has read, by partition. */
    static final class Member {
        final KafkaConsumer<String, String> consumer;
        final Map<Integer, Set<String>> read = new TreeMap<>();

        Member(String group, String clientId, String topic) {
            consumer = consumer(group, clientId);
            consumer.subscribe(List.of(topic));
        }

        void poll() {
            for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(100))) {
                read.computeIfAbsent(record.partition(), p -> new TreeSet<>())
                        .add(record.offset() + ":" + record.value());
            }
        }

        List<Integer> owned() {
            return consumer.assignment().stream().map(TopicPartition::partition).sorted().toList();
        }

        int generation() {
            return consumer.groupMetadata().generationId();
        }

        boolean readAll(Map<Integer, Long> ends) {
            for (TopicPartition tp : consumer.assignment()) {
                if (consumer.position(tp) < ends.get(tp.partition())) {
                    return false;
                }
            }
            return true;
        }

        /** The records of the partitions it owns, each once (a rebalance may serve some again). */
        Map<Integer, Set<String>> readOwned() {
            Map<Integer, Set<String>> owned = new TreeMap<>();
            for (int partition : owned()) {
                owned.put(partition, read.getOrDefault(partition, new TreeSet<>()));
            }
            return owned;
        }

        Map<String, Object> state() {
            Map<String, Object> state = new LinkedHashMap<>();
            state.put("generation", generation());
            state.put("assignment", owned());
            return state;
        }
    }

    static void pollUntil(List<Member> members, BooleanSupplier condition, String what) {
        waitUntil(() -> {
            for (Member member : members) {
                member.poll();
            }
            return condition.getAsBoolean();
        }, what);
    }

    static Object describeGroup(Admin admin, String group) throws Exception {
        ConsumerGroupDescription description =
                admin.describeConsumerGroups(List.of(group)).all().get().get(group);
        List<Object> members = new ArrayList<>();
        List<MemberDescription> sorted = new ArrayList<>(description.members());
        sorted.sort(Comparator.comparing(MemberDescription::clientId));
        for (MemberDescription member : sorted) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("client_id", member.clientId());
            m.put("assignment", member.assignment().topicPartitions().stream()
                    .map(tp -> tp.topic() + ":" + tp.partition()).sorted().toList());
            members.add(m);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("state", description.groupState().toString());
        out.put("type", description.type().toString());
        out.put("assignor", description.partitionAssignor());
        out.put("simple", description.isSimpleConsumerGroup());
        out.put("members", members);
        return out;
    }

    static Object committed(Admin admin, String group) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offsets =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
        Map<String, Object> out = new TreeMap<>();
        offsets.forEach((tp, o) -> out.put(tp.topic() + ":" + tp.partition(), o == null ? null : o.offset()));
        return out;
    }

    static void groups(Admin admin, String topic) throws Exception {
        String group = prefix + "-g";
        Map<Integer, Long> ends = new TreeMap<>();
        try (KafkaConsumer<String, String> probe = consumer(null, "ends")) {
            probe.endOffsets(partitions(topic, 4)).forEach((tp, end) -> ends.put(tp.partition(), end));
        }
        Member first = new Member(group, "m1", topic);
        Member second = null;
        try {
            pollUntil(List.of(first), () -> first.owned().size() == 4, "the first member's assignment");
            RECORDING.put("group_first_member", first.state());
            RECORDING.put("group_described_one", outcome(() -> describeGroup(admin, group)));
            Member joining = new Member(group, "m2", topic);
            second = joining;
            List<Member> both = List.of(first, joining);
            pollUntil(both, () -> first.owned().size() == 2 && joining.owned().size() == 2
                    && first.generation() == joining.generation(), "two members of one generation");
            RECORDING.put("group_two_members", List.of(first.state(), joining.state()));
            pollUntil(both, () -> first.readAll(ends) && joining.readAll(ends), "every record read");
            RECORDING.put("group_read", List.of(first.readOwned(), joining.readOwned()));
            first.consumer.commitSync();
            joining.consumer.commitSync();
            RECORDING.put("group_committed", outcome(() -> committed(admin, group)));
            RECORDING.put("group_described_two", outcome(() -> describeGroup(admin, group)));
            RECORDING.put("commit_by_non_member", outcome(() -> {
                try (KafkaConsumer<String, String> outsider = consumer(group, "outsider")) {
                    TopicPartition tp = new TopicPartition(topic, 0);
                    outsider.assign(List.of(tp));
                    outsider.commitSync(Map.of(tp, new OffsetAndMetadata(1)));
                }
                return "ok";
            }));
            joining.consumer.close();
            second = null;
            pollUntil(List.of(first), () -> first.owned().size() == 4, "the rebalance after a leave");
            RECORDING.put("group_after_leave", first.state());
        } finally {
            if (second != null) {
                second.consumer.close();
            }
            first.consumer.close();
        }
        RECORDING.put("group_described_empty", outcome(() -> describeGroup(admin, group)));
        RECORDING.put("group_offsets_altered", outcome(() -> {
            admin.alterConsumerGroupOffsets(group, Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(2)))
                    .all().get();
            return committed(admin, group);
        }));
        RECORDING.put("groups_listed", outcome(() -> {
            Collection<GroupListing> listed = admin.listGroups(new ListGroupsOptions()).all().get();
            List<Object> out = new ArrayList<>();
            listed.stream().filter(g -> g.groupId().startsWith(prefix))
                    .sorted(Comparator.comparing(GroupListing::groupId)).forEach(g -> out.add(List.of(
                            g.groupId(), g.protocol(), String.valueOf(g.type().orElse(null)),
                            String.valueOf(g.groupState().orElse(null)))));
            return out;
        }));
        RECORDING.put("describe_missing_group", outcome(() -> describeGroup(admin, prefix + "-nogroup")));
        RECORDING.put("committed_missing_group", outcome(() -> committed(admin, prefix + "-nogroup")));
    }
}
