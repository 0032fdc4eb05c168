import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka's Java clients in a consume-transform-produce loop (tests/transactions/test_java_clients.py):
 * reads {@code count} records of {@code input} with a read_committed consumer of {@code group},
 * writes each value upper-cased to {@code output} in transactions that also commit the consumed
 * offsets (sendOffsetsToTransaction); every third transaction is aborted and its records read again.
 * Prints "copied N" and "aborted M" at the end.
 *
 * <p>Arguments: bootstrap transactional-id group input output count.
 */
public class TransactionalCopy {
    public static void main(String[] args) {
        String bootstrap = args[0], transactionalId = args[1], group = args[2];
        String input = args[3], output = args[4];
        int count = Integer.parseInt(args[5]);

        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "7");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());

        int copied = 0, aborted = 0, round = 0;
        long deadline = System.currentTimeMillis() + 90_000;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
             KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            while (copied < count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    String value = new String(record.value()).toUpperCase();
                    producer.send(new ProducerRecord<>(output, value.getBytes()));
                    next.put(new TopicPartition(record.topic(), record.partition()),
                             new OffsetAndMetadata(record.offset() + 1));
                }
                producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
                if (++round % 3 == 0) {
                    producer.abortTransaction();
                    aborted += records.count();
                    for (TopicPartition tp : records.partitions()) {
                        OffsetAndMetadata committed = consumer.committed(java.util.Set.of(tp)).get(tp);
                        consumer.seek(tp, committed == null ? 0 : committed.offset());
                    }
                    continue;
                }
                producer.commitTransaction();
                copied += records.count();
            }
        }
        System.out.println("copied " + copied);
        System.out.println("aborted " + aborted);
    }
}
