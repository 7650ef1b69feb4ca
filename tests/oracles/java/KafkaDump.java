// KafkaDump: test oracle that decodes record-set files with Apache Kafka's own reader (kafka-clients 4.3.0)
// and prints the decoding as JSON lines, in the format of the fixtures' *.expected.jsonl files.
//   javac -cp "<kafka-clients-4.3.0.jar>:<lz4-java>:<snappy-java>:<zstd-jni>:<slf4j-api>" -d classes KafkaDump.java
//   java  -cp "<same jars>:classes" KafkaDump FILE [FILE...]
// Per FILE: "#FILE <path>", one JSON object per record (or one per empty batch), at most one
// {"error":...,"position":...} line (decoding of the file stops there), then
// "#END <path> validBytes=<n> sizeInBytes=<m>". Exit 0 even if a file had an error line; 2 on usage or I/O error.
// JSON is byte-identical to Python's json.dumps(obj, separators=(",", ":")) (ASCII only).
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.internal.ControlRecordType;
import org.apache.kafka.common.record.internal.FileLogInputStream.FileChannelRecordBatch;
import org.apache.kafka.common.record.internal.FileRecords;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.utils.BufferSupplier;
import org.apache.kafka.common.utils.CloseableIterator;

import java.io.BufferedWriter;
import java.io.File;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Iterator;
import java.util.List;

public class KafkaDump {
    private static final char[] HEX = "0123456789abcdef".toCharArray();

    public static void main(String[] args) {
        if (args.length == 0) {
            System.err.println("usage: java KafkaDump FILE [FILE...]");
            System.exit(2);
        }
        Writer out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
        try {
            for (String path : args) dumpFile(path, out);
            out.flush();
        } catch (IOException e) {
            try { out.flush(); } catch (IOException ignored) { }
            System.err.println("KafkaDump: " + e);
            System.exit(2);
        }
    }

    static void dumpFile(String path, Writer out) throws IOException {
        out.write("#FILE " + path + "\n");
        try (FileRecords records = FileRecords.open(new File(path), false)) {
            int validBytes = 0;
            Iterator<FileChannelRecordBatch> it = records.batches().iterator();
            while (true) {
                FileChannelRecordBatch batch = null;
                List<String> lines;
                try {
                    if (!it.hasNext()) break;
                    batch = it.next();
                    lines = decodeBatch(batch);
                } catch (Exception e) {
                    // a failing iterator (corrupt size field) fails at the end of the last good batch
                    int position = batch != null ? batch.position() : validBytes;
                    StringBuilder sb = new StringBuilder("{\"error\":");
                    str(sb, e.getClass().getSimpleName() + ": " + e.getMessage());
                    sb.append(",\"position\":").append(position).append("}\n");
                    out.write(sb.toString());
                    validBytes = position;
                    break;
                }
                for (String line : lines) out.write(line);
                validBytes = batch.position() + batch.sizeInBytes();
            }
            out.write("#END " + path + " validBytes=" + validBytes + " sizeInBytes=" + records.sizeInBytes() + "\n");
        }
    }

    /** All lines of one batch (each ending in '\n'); throws if any part of the batch fails to decode. */
    static List<String> decodeBatch(FileChannelRecordBatch batch) {
        batch.ensureValid();
        StringBuilder p = new StringBuilder(320);
        p.append("{\"batch_base_offset\":").append(batch.baseOffset());
        p.append(",\"batch_last_offset\":").append(batch.lastOffset());
        p.append(",\"magic\":").append(batch.magic());
        p.append(",\"compression\":");
        str(p, batch.compressionType().name);
        p.append(",\"timestamp_type\":");
        str(p, batch.timestampType().name);
        p.append(",\"is_transactional\":").append(batch.isTransactional());
        p.append(",\"is_control\":").append(batch.isControlBatch());
        p.append(",\"producer_id\":").append(batch.producerId());
        p.append(",\"producer_epoch\":").append(batch.producerEpoch());
        p.append(",\"base_sequence\":").append(batch.baseSequence());
        p.append(",\"partition_leader_epoch\":").append(batch.partitionLeaderEpoch());
        String prefix = p.toString();

        List<String> lines = new ArrayList<>();
        try (CloseableIterator<Record> records = batch.streamingIterator(BufferSupplier.NO_CACHING)) {
            while (records.hasNext()) {
                Record r = records.next();
                StringBuilder sb = new StringBuilder(prefix.length() + 256).append(prefix);
                sb.append(",\"offset\":").append(r.offset());
                sb.append(",\"timestamp\":").append(r.timestamp());
                sb.append(",\"key_b64\":");
                b64(sb, r.key());
                sb.append(",\"value_b64\":");
                b64(sb, r.value());
                sb.append(",\"headers\":[");
                Header[] headers = r.headers();
                for (int i = 0; i < headers.length; i++) {
                    if (i > 0) sb.append(',');
                    sb.append('[');
                    str(sb, headers[i].key());
                    sb.append(',');
                    byte[] v = headers[i].value();
                    if (v == null) sb.append("null");
                    else str(sb, Base64.getEncoder().encodeToString(v));
                    sb.append(']');
                }
                sb.append("],\"control_type\":");
                if (batch.isControlBatch()) str(sb, ControlRecordType.parse(r.key()).name());
                else sb.append("null");
                lines.add(sb.append("}\n").toString());
            }
        }
        if (lines.isEmpty())
            lines.add(prefix + ",\"offset\":null,\"timestamp\":null,\"key_b64\":null,\"value_b64\":null,"
                    + "\"headers\":null,\"control_type\":null}\n");
        return lines;
    }

    static void b64(StringBuilder sb, ByteBuffer buf) {
        if (buf == null) { sb.append("null"); return; }
        ByteBuffer b = buf.duplicate();
        byte[] bytes = new byte[b.remaining()];
        b.get(bytes);
        str(sb, Base64.getEncoder().encodeToString(bytes));
    }

    /** A JSON string exactly as Python's json.dumps(s) (ensure_ascii=True) writes it. */
    static void str(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                case '\b': sb.append("\\b"); break;
                case '\f': sb.append("\\f"); break;
                default:
                    if (c >= 0x20 && c <= 0x7e) sb.append(c);
                    else sb.append("\\u").append(HEX[(c >> 12) & 15]).append(HEX[(c >> 8) & 15])
                            .append(HEX[(c >> 4) & 15]).append(HEX[c & 15]);
            }
        }
        sb.append('"');
    }
}
