import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;

/**
 * A Kafka Streams application with exactly-once processing (exactly_once_v2): the words of topic
 * "words" counted (a repartition topic by word, a RocksDB store with its changelog topic), each
 * word's latest count written to "counts". Used by tests/transactions/test_streams.py.
 *
 * <p>Arguments: bootstrap servers, state directory, the total of counts to wait for on "counts"
 * (read_committed), and "halt" or "close": halt stops the JVM at once when the total is reached,
 * as a crash would (open transactions left to the next instance to fence and abort); close
 * closes the application cleanly. Prints "RUNNING" when the application runs and then
 * "counts word=n ..." (the latest count of each word it read) before it stops.
 */
public class StreamsWordCount {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        long total = Long.parseLong(args[2]);
        boolean halt = args[3].equals("halt");
        Properties config = new Properties();
        config.put(StreamsConfig.APPLICATION_ID_CONFIG, "word-count");
        config.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        config.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
        config.put(StreamsConfig.STATE_DIR_CONFIG, args[1]);
        config.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        config.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        config.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        // Small fetches: a halted instance is caught with work in flight, not all done at once.
        config.put(StreamsConfig.consumerPrefix("max.poll.records"), 10);
        // The halted instance's member leaves the group when its session ends: not 45 s later.
        config.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 10_000);
        config.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1_000);
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("words")
            .groupBy((key, word) -> word)
            .count()
            .toStream()
            .mapValues(count -> Long.toString(count))
            .to("counts");
        KafkaStreams streams = new KafkaStreams(builder.build(), config);
        CountDownLatch running = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING) {
                running.countDown();
            }
        });
        streams.start();
        if (!running.await(120, TimeUnit.SECONDS)) {
            System.out.println("not running: " + streams.state());
            System.exit(3);
        }
        System.out.println("RUNNING");
        Map<String, Long> latest = readCounts(bootstrap, total);
        System.out.println("counts " + latest);
        System.out.flush();
        if (halt) {
            Runtime.getRuntime().halt(0);
        }
        streams.close(Duration.ofSeconds(60));
    }

    /** The latest count of each word on "counts" (read_committed), once they add up to total. */
    static Map<String, Long> readCounts(String bootstrap, long total) {
        Properties config = new Properties();
        config.put("bootstrap.servers", bootstrap);
        config.put("group.id", "count-reader-" + System.nanoTime());
        config.put("auto.offset.reset", "earliest");
        config.put("isolation.level", "read_committed");
        config.put("key.deserializer", StringDeserializer.class.getName());
        config.put("value.deserializer", StringDeserializer.class.getName());
        Map<String, Long> latest = new TreeMap<>();
        long deadline = System.currentTimeMillis() + 180_000;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(config)) {
            consumer.subscribe(List.of("counts"));
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    latest.put(record.key(), Long.parseLong(record.value()));
                }
                if (latest.values().stream().mapToLong(Long::longValue).sum() >= total) {
                    break;
                }
            }
        }
        return latest;
    }
}
