// A broker-side KIP-714 receiver for tests/metrics/test_telemetry_broker.py: every pushed
// payload is appended to the file named by the broker property aiokproto.telemetry.file,
// one line each: client instance id, client id, terminating, content type, push interval
// (ms), then the (decompressed) OTLP bytes in base64, tab-separated.
//
// A broker answers GetTelemetrySubscriptions/PushTelemetry only when one of its
// metric.reporters provides a telemetry exporter: in Kafka 4.x the interface is
// ClientTelemetryExporterProvider (ClientTelemetry, its predecessor, is still accepted).

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.Base64;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetryContext;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;

public class TelemetryRecorder implements MetricsReporter, ClientTelemetryExporterProvider {
    public static final String FILE_CONFIG = "aiokproto.telemetry.file";

    private volatile Path out;

    @Override
    public void configure(Map<String, ?> configs) {
        Object file = configs.get(FILE_CONFIG);
        if (file == null) {
            throw new IllegalArgumentException(FILE_CONFIG + " is not set");
        }
        out = Paths.get(file.toString());
    }

    @Override
    public void init(List<KafkaMetric> metrics) {
    }

    @Override
    public void metricChange(KafkaMetric metric) {
    }

    @Override
    public void metricRemoval(KafkaMetric metric) {
    }

    @Override
    public void close() {
    }

    @Override
    public ClientTelemetryExporter clientTelemetryExporter() {
        return this::record;
    }

    private synchronized void record(ClientTelemetryContext context, ClientTelemetryPayload payload) {
        ByteBuffer data = payload.data().duplicate();
        byte[] bytes = new byte[data.remaining()];
        data.get(bytes);
        String line = payload.clientInstanceId()
            + "\t" + context.authorizableRequestContext().clientId()
            + "\t" + payload.isTerminating()
            + "\t" + payload.contentType()
            + "\t" + context.pushIntervalMs()
            + "\t" + Base64.getEncoder().encodeToString(bytes)
            + "\n";
        try {
            Files.write(out, line.getBytes(StandardCharsets.UTF_8),
                StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
