/*
 * coordkit benchmark harness: times Kafka's own assignors (compiled from Kafka's source by
 * tests/benchmarks/kafka_java/build.sh) on the group shapes of tests/benchmarks/bench_kafka_java.py:
 * the client-side range, roundrobin, sticky and cooperative-sticky, and the group coordinator's
 * uniform (KIP-848, timed as UniformAssignor.assign(GroupSpec, SubscribedTopicDescriber)).
 *
 * It lives in Kafka's package only to reach StickyAssignor's package-private userData serializer,
 * the bytes a real eager sticky member sends with its previous assignment.
 *
 * Protocol (one command per stdin line, one JSON reply per stdout line), so that the Python side
 * can interleave single runs of both implementations:
 *   prepare NAME ASSIGNOR SCENARIO TOPICS PARTITIONS_PER_TOPIC MEMBERS   build the group (untimed)
 *   run NAME REPEATS                                                     time REPEATS calls
 *   quit
 * A run times ConsumerPartitionAssignor.assign(Cluster, GroupSubscription), the public entry a
 * group leader calls ("ms"), and the assignor's assignPartitions(partitionsPerTopic, subscriptions)
 * without the metadata lookup ("core_ms"), alternately. Fresh Subscription objects are built
 * before each call: StickyAssignor consumes its userData buffer while reading it.
 */
package org.apache.kafka.clients.consumer;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Set;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupAssignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.internals.AbstractPartitionAssignor;
import org.apache.kafka.clients.consumer.internals.AbstractStickyAssignor.MemberData;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;
import org.apache.kafka.coordinator.group.consumer.Assignment;
import org.apache.kafka.coordinator.group.consumer.GroupSpecImpl;
import org.apache.kafka.coordinator.group.consumer.MemberSubscriptionAndAssignmentImpl;
import org.apache.kafka.coordinator.group.consumer.SubscribedTopicDescriberImpl;
import org.apache.kafka.coordinator.group.consumer.TopicMetadata;

public final class KafkaAssignorBench {
    private static final Node[] NO_NODES = new Node[] {Node.noNode()};

    /** One member's input: what it subscribes to and what it reports owning (generation 1). */
    private static final class Member {
        final List<String> topics;
        final List<TopicPartition> owned; // null: a new member
        Member(List<String> topics, List<TopicPartition> owned) {
            this.topics = topics;
            this.owned = owned;
        }
    }

    private static final class Case {
        final String assignorName;
        final AbstractPartitionAssignor assignor; // null for uniform
        final Cluster cluster;
        final Map<String, List<PartitionInfo>> partitionsPerTopic;
        final Map<String, Member> members;
        final Map<String, Long> topicBase;
        final List<String> memberOrder;
        Case(String assignorName, Cluster cluster, Map<String, List<PartitionInfo>> partitionsPerTopic,
             Map<String, Member> members, Map<String, Long> topicBase) {
            this.assignorName = assignorName;
            this.assignor = assignorName.equals("uniform") ? null : assignor(assignorName);
            this.cluster = cluster;
            this.partitionsPerTopic = partitionsPerTopic;
            this.members = members;
            this.topicBase = topicBase;
            this.memberOrder = new ArrayList<>(members.keySet());
            Collections.sort(this.memberOrder);
        }

        Map<String, Subscription> subscriptions() {
            Map<String, Subscription> out = new HashMap<>();
            for (Map.Entry<String, Member> e : members.entrySet()) {
                out.put(e.getKey(), subscription(assignorName, e.getValue()));
            }
            return out;
        }
    }

    static AbstractPartitionAssignor assignor(String name) {
        switch (name) {
            case "range": return new RangeAssignor();
            case "roundrobin": return new RoundRobinAssignor();
            case "sticky": return new StickyAssignor();
            case "cooperative-sticky": return new CooperativeStickyAssignor();
            default: throw new IllegalArgumentException("unknown assignor " + name);
        }
    }

    static Subscription subscription(String assignorName, Member member) {
        if (member.owned == null) {
            return new Subscription(member.topics);
        }
        if (assignorName.equals("sticky")) {
            // Eager: the member revoked everything before joining; its previous assignment and
            // generation travel in userData, as StickyAssignor.subscriptionUserData writes them.
            ByteBuffer userData = StickyAssignor.serializeTopicPartitionAssignment(
                new MemberData(member.owned, Optional.of(1)));
            return new Subscription(member.topics, userData, Collections.emptyList(), 1, Optional.empty());
        }
        return new Subscription(member.topics, null, member.owned, 1, Optional.empty());
    }

    static String topicName(int i) {
        return String.format("t%03d", i);
    }

    static String memberName(int i) {
        return String.format("consumer-%04d", i);
    }

    static Case prepare(String assignorName, String scenario, int topicCount, int perTopic, int memberCount) {
        List<String> topics = new ArrayList<>();
        List<PartitionInfo> infos = new ArrayList<>();
        Map<String, List<PartitionInfo>> perTopicInfos = new HashMap<>();
        Map<String, Long> base = new HashMap<>();
        for (int t = 0; t < topicCount; t++) {
            String topic = topicName(t);
            topics.add(topic);
            base.put(topic, (long) t * perTopic); // names sort like their numbers
            List<PartitionInfo> list = new ArrayList<>(perTopic);
            for (int p = 0; p < perTopic; p++) {
                list.add(new PartitionInfo(topic, p, Node.noNode(), NO_NODES, NO_NODES));
            }
            infos.addAll(list);
            perTopicInfos.put(topic, list);
        }
        Cluster cluster = new Cluster("bench", Collections.singletonList(Node.noNode()), infos,
            Collections.emptySet(), Collections.emptySet());
        boolean general = scenario.startsWith("general");
        List<String> firstTopic = Collections.singletonList(topics.get(0));
        Map<String, Member> fresh = new LinkedHashMap<>();
        for (int i = 0; i < memberCount; i++) {
            List<String> subscribed = general && i == memberCount - 1 ? firstTopic : topics;
            fresh.put(memberName(i), new Member(subscribed, null));
        }
        Case freshCase = new Case(assignorName, cluster, perTopicInfos, fresh, base);
        if (scenario.endsWith("fresh")) {
            return freshCase;
        }
        // Every other scenario starts from what StickyAssignor gave the fresh group (coordkit does
        // the same with its own assignor; the checksums compare the results).
        Case stickyFresh = new Case("sticky", cluster, perTopicInfos, fresh, base);
        Map<String, List<TopicPartition>> first = new HashMap<>();
        GroupAssignment firstResult = stickyFresh.assignor.assign(cluster, new GroupSubscription(stickyFresh.subscriptions()));
        for (Map.Entry<String, ConsumerPartitionAssignor.Assignment> e : firstResult.groupAssignment().entrySet()) {
            first.put(e.getKey(), e.getValue().partitions());
        }
        Map<String, Member> members = new LinkedHashMap<>();
        int i = 0;
        for (Map.Entry<String, Member> e : fresh.entrySet()) {
            String name = e.getKey();
            List<String> subscribed = e.getValue().topics;
            switch (scenario) {
                case "owned":
                case "general-owned":
                    // every member but the first reports what it owns
                    members.put(name, new Member(subscribed, i == 0 ? null : first.get(name)));
                    break;
                case "leaves":
                    // the last member left; everyone else owns its previous partitions
                    if (i != memberCount - 1) {
                        members.put(name, new Member(subscribed, first.get(name)));
                    }
                    break;
                case "joins":
                    members.put(name, new Member(subscribed, first.get(name)));
                    break;
                default:
                    throw new IllegalArgumentException("unknown scenario " + scenario);
            }
            i++;
        }
        if (scenario.equals("joins")) {
            members.put("consumer-new", new Member(topics, null));
        }
        return new Case(assignorName, cluster, perTopicInfos, members, base);
    }

    /** Order-free digest of an assignment: the sum of splitmix64(memberRank << 32 | globalIndex). */
    static long checksum(Case c, Map<String, List<TopicPartition>> assignment) {
        Map<String, Integer> rank = new HashMap<>();
        for (int i = 0; i < c.memberOrder.size(); i++) {
            rank.put(c.memberOrder.get(i), i);
        }
        long sum = 0;
        for (Map.Entry<String, List<TopicPartition>> e : assignment.entrySet()) {
            long member = rank.get(e.getKey());
            for (TopicPartition tp : e.getValue()) {
                long index = c.topicBase.get(tp.topic()) + tp.partition();
                sum += splitmix64((member << 32) | index);
            }
        }
        return sum;
    }

    static long splitmix64(long z) {
        z += 0x9E3779B97F4A7C15L;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    /** The group coordinator's input for the same group: topic ids, subscriptions, current assignments. */
    private static final class UniformInput {
        final GroupSpecImpl spec;
        final SubscribedTopicDescriberImpl describer;
        final Map<Uuid, String> topicOfId = new HashMap<>();

        UniformInput(Case c) {
            Map<String, Uuid> idOf = new HashMap<>();
            Map<Uuid, TopicMetadata> metadata = new HashMap<>();
            for (Map.Entry<String, List<PartitionInfo>> e : c.partitionsPerTopic.entrySet()) {
                Uuid id = new Uuid(0x636f6f72646b6974L, c.topicBase.get(e.getKey()) + 1); // fixed ids
                idOf.put(e.getKey(), id);
                topicOfId.put(id, e.getKey());
                metadata.put(id, new TopicMetadata(id, e.getKey(), e.getValue().size(), Collections.emptyMap()));
            }
            Map<String, MemberSubscriptionAndAssignmentImpl> members = new HashMap<>();
            Map<Uuid, Map<Integer, String>> inverted = new HashMap<>();
            Set<Set<Uuid>> distinct = new HashSet<>();
            for (Map.Entry<String, Member> e : c.members.entrySet()) {
                Set<Uuid> subscribed = new HashSet<>();
                for (String topic : e.getValue().topics) {
                    subscribed.add(idOf.get(topic));
                }
                distinct.add(subscribed);
                Map<Uuid, Set<Integer>> current = new HashMap<>();
                if (e.getValue().owned != null) {
                    for (TopicPartition tp : e.getValue().owned) {
                        Uuid id = idOf.get(tp.topic());
                        current.computeIfAbsent(id, k -> new HashSet<>()).add(tp.partition());
                        inverted.computeIfAbsent(id, k -> new HashMap<>()).put(tp.partition(), e.getKey());
                    }
                }
                members.put(e.getKey(), new MemberSubscriptionAndAssignmentImpl(
                    Optional.empty(), subscribed, new Assignment(current)));
            }
            SubscriptionType type = distinct.size() <= 1 ? SubscriptionType.HOMOGENEOUS : SubscriptionType.HETEROGENEOUS;
            spec = new GroupSpecImpl(members, type, inverted);
            describer = new SubscribedTopicDescriberImpl(metadata);
        }
    }

    static String runUniform(String name, Case c, UniformInput input, int repeats) {
        List<Double> ms = new ArrayList<>();
        Map<String, List<TopicPartition>> last = null;
        for (int r = 0; r < repeats; r++) {
            UniformAssignor assignor = new UniformAssignor();
            long started = System.nanoTime();
            org.apache.kafka.coordinator.group.api.assignor.GroupAssignment result =
                assignor.assign(input.spec, input.describer);
            ms.add((System.nanoTime() - started) / 1e6);
            last = new HashMap<>();
            for (Map.Entry<String, MemberAssignment> e : result.members().entrySet()) {
                List<TopicPartition> partitions = new ArrayList<>();
                for (Map.Entry<Uuid, Set<Integer>> t : e.getValue().partitions().entrySet()) {
                    for (int p : t.getValue()) {
                        partitions.add(new TopicPartition(input.topicOfId.get(t.getKey()), p));
                    }
                }
                last.put(e.getKey(), partitions);
            }
        }
        return report(name, c, ms, ms, last);
    }

    static String run(String name, Case c, int repeats) {
        List<Double> ms = new ArrayList<>();
        List<Double> coreMs = new ArrayList<>();
        Map<String, List<TopicPartition>> last = null;
        for (int r = 0; r < repeats; r++) {
            Map<String, Subscription> subscriptions = c.subscriptions();
            GroupSubscription group = new GroupSubscription(subscriptions);
            long started = System.nanoTime();
            GroupAssignment result = c.assignor.assign(c.cluster, group);
            ms.add((System.nanoTime() - started) / 1e6);

            subscriptions = c.subscriptions();
            started = System.nanoTime();
            Map<String, List<TopicPartition>> core = c.assignor.assignPartitions(c.partitionsPerTopic, subscriptions);
            coreMs.add((System.nanoTime() - started) / 1e6);
            last = new HashMap<>();
            for (Map.Entry<String, ConsumerPartitionAssignor.Assignment> e : result.groupAssignment().entrySet()) {
                last.put(e.getKey(), e.getValue().partitions());
            }
            if (r == 0 && !last.equals(core)) {
                throw new IllegalStateException("assign and assignPartitions disagree for " + name);
            }
        }
        return report(name, c, ms, coreMs, last);
    }

    static String report(String name, Case c, List<Double> ms, List<Double> coreMs,
                         Map<String, List<TopicPartition>> last) {
        int min = Integer.MAX_VALUE;
        int max = 0;
        for (List<TopicPartition> partitions : last.values()) {
            min = Math.min(min, partitions.size());
            max = Math.max(max, partitions.size());
        }
        return "{\"case\": \"" + name + "\", \"ms\": " + ms + ", \"core_ms\": " + coreMs
            + ", \"checksum\": \"" + Long.toUnsignedString(checksum(c, last)) + "\""
            + ", \"min_count\": " + min + ", \"max_count\": " + max + "}";
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        Map<String, Case> cases = new HashMap<>();
        Map<String, UniformInput> uniformInputs = new HashMap<>();
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            try {
                switch (words[0]) {
                    case "prepare":
                        cases.clear(); // one group in memory at a time
                        uniformInputs.clear();
                        System.gc();
                        Case prepared = prepare(words[2], words[3], Integer.parseInt(words[4]),
                            Integer.parseInt(words[5]), Integer.parseInt(words[6]));
                        cases.put(words[1], prepared);
                        if (words[2].equals("uniform")) {
                            uniformInputs.put(words[1], new UniformInput(prepared));
                        }
                        out.println("{\"case\": \"" + words[1] + "\", \"ready\": true}");
                        break;
                    case "run":
                        Case c = cases.get(words[1]);
                        if (c == null) {
                            throw new IllegalArgumentException("case " + words[1] + " is not prepared");
                        }
                        UniformInput uniform = uniformInputs.get(words[1]);
                        out.println(uniform != null
                            ? runUniform(words[1], c, uniform, Integer.parseInt(words[2]))
                            : run(words[1], c, Integer.parseInt(words[2])));
                        break;
                    case "quit":
                        return;
                    default:
                        throw new IllegalArgumentException("unknown command " + words[0]);
                }
            } catch (RuntimeException e) {
                out.println("{\"error\": \"" + String.valueOf(e).replace("\\", "\\\\").replace("\"", "'") + "\"}");
            }
        }
    }

    private KafkaAssignorBench() { }
}
