package org.apache.kafka.coordinator.group.generated;

import java.util.List;

import org.apache.kafka.common.Uuid;

/**
 * Harness shim: the accessors Assignment.fromRecord names (the real class is generated from the
 * group coordinator's record schemas at build time); the benchmark never reads a record.
 */
public class ConsumerGroupTargetAssignmentMemberValue {
    public List<TopicPartition> topicPartitions() {
        throw new UnsupportedOperationException("harness shim");
    }

    public static class TopicPartition {
        public Uuid topicId() {
            throw new UnsupportedOperationException("harness shim");
        }

        public List<Integer> partitions() {
            throw new UnsupportedOperationException("harness shim");
        }
    }
}
