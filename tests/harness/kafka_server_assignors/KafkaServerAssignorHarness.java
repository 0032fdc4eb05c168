// Kafka 4's server-side assignors (the group coordinator's UniformAssignor and RangeAssignor, and
// the share groups' SimpleAssignor, from the fetched jars) driven line by line from stdin, for coordkit's differential test and benchmark
// (tests/harness/kafka_server_assignors.py writes the protocol below).
//
// A group, then a command:
//   group <topics> <members> <homogeneous 0|1>
//   topic <mostSigBits> <leastSigBits> <partitions>          (topics numbered from 0)
//   member <id> <instanceId|-> <rack|-> <n> <topic>... <k> (<topic> <m> <partition>...)...
//   assign <uniform|range|simple>        -> "member <id> <topic> <partition>..." lines, then "end"
//   time <uniform|range|simple> <rounds> -> one "ns <nanoseconds>" per round, then "end"
// Members, their topics and their partitions are handed over in the order given (LinkedHashMap,
// LinkedHashSet): coordkit's GroupSpec lists them in the order Kafka's coordinator iterates them.
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.util.*;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.*;
import org.apache.kafka.coordinator.group.assignor.RangeAssignor;
import org.apache.kafka.coordinator.group.assignor.SimpleAssignor;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;

public class KafkaServerAssignorHarness {
    record Member(Optional<String> rack, Optional<String> instance, Set<Uuid> topics,
                  Map<Uuid, Set<Integer>> assignment) implements MemberSubscription, MemberAssignment {
        public Optional<String> rackId() { return rack; }
        public Optional<String> instanceId() { return instance; }
        public Set<Uuid> subscribedTopicIds() { return topics; }
        public Map<Uuid, Set<Integer>> partitions() { return assignment; }
    }

    static final class Spec implements GroupSpec {
        final Map<String, Member> members;
        final SubscriptionType type;
        // Kafka's GroupSpecImpl: topic -> partition -> member, a HashMap as the coordinator keeps it.
        final Map<Uuid, Map<Integer, String>> inverted = new HashMap<>();

        Spec(Map<String, Member> members, SubscriptionType type) {
            this.members = members;
            this.type = type;
            members.forEach((id, m) -> m.assignment().forEach((t, ps) -> {
                Map<Integer, String> owners = inverted.computeIfAbsent(t, k -> new HashMap<>());
                for (int p : ps) owners.put(p, id);
            }));
        }
        public Collection<String> memberIds() { return members.keySet(); }
        public SubscriptionType subscriptionType() { return type; }
        public boolean isPartitionAssigned(Uuid topic, int partition) {
            Map<Integer, String> owners = inverted.get(topic);
            return owners != null && owners.containsKey(partition);
        }
        public boolean isPartitionAssignable(Uuid topic, int partition) { return true; }
        public MemberSubscription memberSubscription(String id) { return members.get(id); }
        public MemberAssignment memberAssignment(String id) { return members.get(id); }
    }

    record Topics(Map<Uuid, Integer> counts) implements SubscribedTopicDescriber {
        public int numPartitions(Uuid topic) { return counts.getOrDefault(topic, -1); }
        public Set<String> racksForPartition(Uuid topic, int partition) { return Set.of(); }
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 20);
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 20);
        Spec spec = null;
        Topics topics = null;
        List<Uuid> ids = new ArrayList<>();
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split(" ");
            switch (f[0]) {
                case "group" -> {
                    int topicCount = Integer.parseInt(f[1]);
                    int memberCount = Integer.parseInt(f[2]);
                    boolean homogeneous = f[3].equals("1");
                    ids = new ArrayList<>();
                    Map<Uuid, Integer> counts = new HashMap<>();
                    for (int i = 0; i < topicCount; i++) {
                        String[] t = in.readLine().split(" ");
                        Uuid id = new Uuid(Long.parseLong(t[1]), Long.parseLong(t[2]));
                        ids.add(id);
                        counts.put(id, Integer.parseInt(t[3]));
                    }
                    Map<String, Member> members = new LinkedHashMap<>();
                    for (int i = 0; i < memberCount; i++) {
                        String[] m = in.readLine().split(" ");
                        int k = 4;
                        int n = Integer.parseInt(m[k++]);
                        Set<Uuid> subscribed = new LinkedHashSet<>();
                        for (int j = 0; j < n; j++) subscribed.add(ids.get(Integer.parseInt(m[k++])));
                        int held = Integer.parseInt(m[k++]);
                        Map<Uuid, Set<Integer>> assignment = new LinkedHashMap<>();
                        for (int j = 0; j < held; j++) {
                            Uuid topic = ids.get(Integer.parseInt(m[k++]));
                            int size = Integer.parseInt(m[k++]);
                            Set<Integer> ps = new LinkedHashSet<>(size * 2);
                            for (int p = 0; p < size; p++) ps.add(Integer.parseInt(m[k++]));
                            assignment.put(topic, ps);
                        }
                        members.put(m[1], new Member(optional(m[3]), optional(m[2]),
                            Collections.unmodifiableSet(subscribed), Collections.unmodifiableMap(assignment)));
                    }
                    spec = new Spec(members, homogeneous ? SubscriptionType.HOMOGENEOUS : SubscriptionType.HETEROGENEOUS);
                    topics = new Topics(counts);
                }
                case "assign" -> {
                    Map<Uuid, Integer> index = new HashMap<>();
                    for (int i = 0; i < ids.size(); i++) index.put(ids.get(i), i);
                    try {
                        GroupAssignment result = assignor(f[1]).assign(spec, topics);
                        for (Map.Entry<String, MemberAssignment> e : result.members().entrySet()) {
                            for (Map.Entry<Uuid, Set<Integer>> tp : e.getValue().partitions().entrySet()) {
                                StringBuilder s = new StringBuilder("member ").append(e.getKey()).append(' ')
                                    .append(index.get(tp.getKey()));
                                for (int p : tp.getValue()) s.append(' ').append(p);
                                out.write(s.append('\n').toString());
                            }
                        }
                    } catch (PartitionAssignorException error) {
                        out.write("error " + error.getMessage().replace('\n', ' ') + "\n");
                    }
                    out.write("end\n");
                    out.flush();
                }
                case "time" -> {
                    PartitionAssignor assignor = assignor(f[1]);
                    int rounds = Integer.parseInt(f[2]);
                    for (int r = 0; r < rounds; r++) {
                        long start = System.nanoTime();
                        GroupAssignment result = assignor.assign(spec, topics);
                        long took = System.nanoTime() - start;
                        out.write("ns " + took + " " + result.members().size() + "\n");
                    }
                    out.write("end\n");
                    out.flush();
                }
                default -> throw new IllegalArgumentException("unknown command: " + line);
            }
        }
        out.flush();
    }

    static Optional<String> optional(String value) {
        return value.equals("-") ? Optional.empty() : Optional.of(value);
    }

    static PartitionAssignor assignor(String name) {
        return switch (name) {
            case "uniform" -> new UniformAssignor();
            case "range" -> new RangeAssignor();
            case "simple" -> new SimpleAssignor();
            default -> throw new IllegalArgumentException("unknown assignor: " + name);
        };
    }
}
