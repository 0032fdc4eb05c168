package org.apache.kafka.coordinator.group.generated;

import java.util.List;

import org.apache.kafka.common.Uuid;

/**
 * Harness shim: the accessors TopicMetadata.fromRecord names (the real class is generated from the
 * group coordinator's record schemas at build time); the benchmark never reads a record.
 */
public class ConsumerGroupPartitionMetadataValue {
    public static class TopicMetadata {
        public Uuid topicId() {
            throw new UnsupportedOperationException("harness shim");
        }

        public String topicName() {
            throw new UnsupportedOperationException("harness shim");
        }

        public int numPartitions() {
            throw new UnsupportedOperationException("harness shim");
        }

        public List<PartitionMetadata> partitionMetadata() {
            throw new UnsupportedOperationException("harness shim");
        }
    }

    public static class PartitionMetadata {
        public int partition() {
            throw new UnsupportedOperationException("harness shim");
        }

        public List<String> racks() {
            throw new UnsupportedOperationException("harness shim");
        }
    }
}
