// One Java KafkaConsumer member (group.protocol=consumer) for the mixed-group tests.
// Args: bootstrap topic group maxSeconds. Prints, one line each, flushed per poll:
//   "<partition> <offset> <epochMicros>"            a record handed to the application
//   "assigned|revoked|lost <p,p,...> <epochMicros>"  a rebalance callback
//   "closed - <epochMicros>"                         after close() returned
// Commits synchronously after every non-empty poll and in onPartitionsRevoked; stops
// at a line (or EOF) on stdin or after maxSeconds, then leaves with close().

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Collectors;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class MixedMember {
    // the records go to the real stdout; everything else (the client's logging) to stderr
    private static final PrintWriter OUT = new PrintWriter(
        new OutputStreamWriter(new FileOutputStream(FileDescriptor.out), StandardCharsets.UTF_8), false);

    private static long micros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    private static String parts(Collection<TopicPartition> tps) {
        if (tps.isEmpty()) {
            return "-";
        }
        return tps.stream().map(tp -> Integer.toString(tp.partition())).collect(Collectors.joining(","));
    }

    public static void main(String[] args) throws Exception {
        System.setOut(System.err);  // before any logger looks at System.out
        String bootstrap = args[0];
        String topic = args[1];
        String group = args[2];
        long deadline = System.nanoTime() + Long.parseLong(args[3]) * 1_000_000_000L;
        AtomicBoolean quit = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                in.readLine();  // a line or EOF: the test wants us gone
            } catch (Exception e) {
                // the same: stop
            }
            quit.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();

        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("group.protocol", "consumer");
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("max.poll.records", "500");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
        try {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                    OUT.println("revoked " + parts(tps) + " " + micros());
                    OUT.flush();
                    if (!tps.isEmpty()) {
                        consumer.commitSync();  // a clean hand-over: nothing consumed twice
                    }
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                    OUT.println("assigned " + parts(tps) + " " + micros());
                    OUT.flush();
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> tps) {
                    OUT.println("lost " + parts(tps) + " " + micros());
                    OUT.flush();
                }
            });
            while (!quit.get() && System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                long t = micros();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    OUT.println(r.partition() + " " + r.offset() + " " + t);
                }
                OUT.flush();
                if (!records.isEmpty()) {
                    consumer.commitSync();
                }
            }
        } finally {
            consumer.close();  // onPartitionsRevoked (commit), then the leave heartbeat
            OUT.println("closed - " + micros());
            OUT.flush();
        }
    }
}
