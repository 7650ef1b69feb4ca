// KafkaCompress: compress files the way Apache Kafka's producer compresses a v2 batch's records area
// (Compression.<codec>().build().wrapForOutput(..., magic 2), each codec at its default level), for
// tests that compare klog's compress() with Kafka's on large, varied inputs. Built and run against the
// test broker's jars (tests/oracles/broker_fixture.py: kafka-clients and the codec libraries it ships with).
//   java -cp "<kafka-clients and its codec jars>:classes" KafkaCompress CODEC IN OUT [IN OUT...]
// CODEC is gzip, snappy, lz4 or zstd. Exit 2 on error.
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.utils.internals.ByteBufferOutputStream;

import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;

public class KafkaCompress {
    public static void main(String[] args) {
        try {
            Compression codec = switch (args[0]) {
                case "gzip" -> Compression.gzip().build();
                case "snappy" -> Compression.snappy().build();
                case "lz4" -> Compression.lz4().build();
                case "zstd" -> Compression.zstd().build();
                default -> throw new IllegalArgumentException("unknown codec " + args[0]);
            };
            for (int i = 1; i + 1 < args.length; i += 2) {
                byte[] in = Files.readAllBytes(Path.of(args[i]));
                ByteBufferOutputStream sink = new ByteBufferOutputStream(1024);
                try (OutputStream out = codec.wrapForOutput(sink, (byte) 2)) {
                    out.write(in);
                }
                ByteBuffer b = sink.buffer();
                b.flip();
                byte[] res = new byte[b.remaining()];
                b.get(res);
                Files.write(Path.of(args[i + 1]), res);
            }
        } catch (Exception e) {
            e.printStackTrace();
            System.exit(2);
        }
    }
}
