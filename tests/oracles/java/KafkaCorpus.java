// KafkaCorpus: random Kafka log dirs written by Apache Kafka's own record code (kafka-clients 4.3.0:
// MemoryRecordsBuilder, MemoryRecords.withEndTransactionMarker, DefaultRecordBatch.writeEmptyHeader),
// with the truth of what a consumer reads, known because this program decided it (which transactions
// commit, abort or stay open; which offsets were skipped). Nothing is read back from the files.
//   javac -cp "<kafka-clients-4.3.0.jar>:<lz4-java>:<snappy-java>:<zstd-jni>:<slf4j-api>" -d classes KafkaCorpus.java
//   java  -cp "<same jars>:classes" KafkaCorpus OUT_ROOT SEED [SEED...]
// Per SEED, with java.util.Random(SEED) alone (same seed, same bytes): OUT_ROOT/SEED/ is a Kafka log dir
// with 1-3 topics x 1-3 partitions (<topic>-<p>/<20-digit base offset>.log, no index files), sometimes a
// log-start-offset-checkpoint, and beside the partition dirs one <topic>-<p>.truth.jsonl per partition:
//   line 1: {"topic","partition","log_start_offset","log_end_offset","last_stable_offset","segments":[{"base",
//            "bytes","batches","max_timestamp"}],"txns":[{"producer_id","first_offset","marker_offset","status"}],
//            "markers":[{"offset","producer_id","type","stray","timestamp"}],"empty_batches":[[base,last]],"batches","records"}
//   then one line per data record in offset order: {"offset","key","value" (base64 or null),"timestamp"
//   (as a consumer sees it),"timestamp_type" (0 CreateTime, 1 LogAppendTime, -1 none),"headers":[[key,
//   base64|null]],"producer_id","transactional","txn" ("committed"|"aborted"|"open"|null),"magic","codec"}
// The corpus is written to OUT_ROOT/.SEED.tmp and renamed to OUT_ROOT/SEED when complete (an existing
// OUT_ROOT/SEED is replaced). Prints "#CORPUS <seed> partitions=<n> records=<n>" per seed. Exit 2 on error.
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.record.internal.ControlRecordType;
import org.apache.kafka.common.record.internal.DefaultRecordBatch;
import org.apache.kafka.common.record.internal.EndTransactionMarker;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.MemoryRecordsBuilder;
import org.apache.kafka.common.record.internal.RecordBatch;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;

public class KafkaCorpus {
    static final long T0 = 1700000000000L;
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
    static final String[] LEGACY_CODECS = {"none", "gzip", "snappy", "lz4"};  // zstd needs magic 2
    static final String[] TOPICS = {"orders", "clicks", "my-topic", "a.b_c", "x", "events-v2", "T_9", "k-l-m"};
    static final String[] HEADER_KEYS = {"trace", "content-type", "", "h", "\u00fcber", "\u65e5\u672c", "dup", "dup",
            "x\u0000y", "emoji\ud83d\ude00"};
    static final char[] HEX = "0123456789abcdef".toCharArray();

    public static void main(String[] args) {
        if (args.length < 2) {
            System.err.println("usage: java KafkaCorpus OUT_ROOT SEED [SEED...]");
            System.exit(2);
        }
        File root = new File(args[0]);
        try {
            Files.createDirectories(root.toPath());
            for (int i = 1; i < args.length; i++) {
                long seed = Long.parseLong(args[i]);
                int[] counts = corpus(root, seed);
                System.out.println("#CORPUS " + seed + " partitions=" + counts[0] + " records=" + counts[1]);
            }
        } catch (Exception e) {
            e.printStackTrace();
            System.exit(2);
        }
        System.out.flush();
    }

    // ------------------------------------------------------------------------------------------------

    static int[] corpus(File root, long seed) throws IOException {
        Random r = new Random(seed);
        Path tmp = root.toPath().resolve("." + seed + ".tmp");
        Path dst = root.toPath().resolve(Long.toString(seed));
        deleteTree(tmp);
        Files.createDirectories(tmp);
        List<String> names = new ArrayList<>(List.of(TOPICS));
        int topics = 1 + r.nextInt(3);
        int records = 0, partitions = 0;
        Map<String, Long> logStarts = new LinkedHashMap<>();
        for (int t = 0; t < topics; t++) {
            String topic = names.remove(r.nextInt(names.size()));
            int parts = 1 + r.nextInt(3);
            for (int p = 0; p < parts; p++) {
                Partition part = new Partition(r, topic, p);
                part.generate();
                part.write(tmp.toFile());
                if (part.logStart > part.segments.get(0).base) logStarts.put(topic + " " + p, part.logStart);
                records += part.records.size();
                partitions++;
            }
        }
        if (!logStarts.isEmpty()) {  // Kafka's CheckpointFile text: version, count, one entry per line
            StringBuilder sb = new StringBuilder("0\n").append(logStarts.size()).append('\n');
            for (Map.Entry<String, Long> e : logStarts.entrySet()) sb.append(e.getKey()).append(' ').append(e.getValue()).append('\n');
            Files.writeString(tmp.resolve("log-start-offset-checkpoint"), sb.toString(), StandardCharsets.UTF_8);
        }
        deleteTree(dst);
        Files.move(tmp, dst, StandardCopyOption.ATOMIC_MOVE);
        return new int[]{partitions, records};
    }

    static void deleteTree(Path p) throws IOException {
        if (!Files.exists(p)) return;
        try (Stream<Path> s = Files.walk(p)) {
            for (Path q : s.sorted(Comparator.reverseOrder()).toList()) Files.delete(q);
        }
    }

    static Compression comp(String c) {
        switch (c) {
            case "gzip": return Compression.gzip().build();
            case "snappy": return Compression.snappy().build();
            case "lz4": return Compression.lz4().build();
            case "zstd": return Compression.zstd().build();
            default: return Compression.NONE;
        }
    }

    // ------------------------------------------------------------------------------------------------

    static final class Txn {
        final long pid;
        final long first;  // base offset of its first data batch (Kafka's currentTxnFirstOffset)
        long marker = -1;
        String status = "open";
        Txn(long pid, long first) { this.pid = pid; this.first = first; }
    }

    static final class Rec {
        long offset, timestamp, pid;
        int tsType, magic;
        byte[] key, value;
        Header[] headers;
        boolean transactional;
        Txn txn;
        String codec;
    }

    static final class Producer {
        final String kind;  // "plain", "idempotent", "transactional"
        final long pid;
        short epoch;
        int seq;
        Txn open;
        Producer(String kind, long pid, short epoch) { this.kind = kind; this.pid = pid; this.epoch = epoch; }
    }

    static final class Segment {
        final long base;
        final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        int batches;
        long maxTimestamp = RecordBatch.NO_TIMESTAMP;  // of its batches: LogSegment.largestTimestamp
        Segment(long base) { this.base = base; }
    }

    static final class Partition {
        final Random r;
        final String topic;
        final int partition;
        final List<Segment> segments = new ArrayList<>();
        final List<Rec> records = new ArrayList<>();
        final List<Txn> txns = new ArrayList<>();
        final List<String> markers = new ArrayList<>();
        final List<long[]> empties = new ArrayList<>();
        long next;  // the next offset: log end offset once done
        long clock = T0;
        int leaderEpoch;
        int batches;
        double rollChance;
        long logStart;

        Partition(Random r, String topic, int partition) {
            this.r = r;
            this.topic = topic;
            this.partition = partition;
        }

        // -- the plan

        void generate() {
            clock = T0 + r.nextInt(1_000_000) * 1000L;
            leaderEpoch = r.nextInt(5);
            next = r.nextInt(4) == 0 ? r.nextInt(5000) : 0;
            double[] rolls = {0.03, 0.12, 0.25, 0.45};
            rollChance = rolls[r.nextInt(rolls.length)];
            nominalStart = next;
            prevNext = next;
            if (r.nextInt(20) == 0) {  // a new partition: one empty segment
                segments.add(new Segment(next));
                logStart = next;
                return;
            }
            if (r.nextInt(5) == 0) next += 1 + r.nextInt(10);  // the first batches were compacted away
            if (r.nextInt(4) == 0) legacyPrefix();
            v2Data();
            next = prevNext;  // a gap after the last batch is no gap: the log ends after that batch
            if (segments.isEmpty()) segments.add(new Segment(nominalStart));
            if (r.nextInt(10) == 0) segments.add(new Segment(next));  // an empty active segment, rolled at the end
            long firstBase = segments.get(0).base;
            logStart = firstBase;
            if (next > firstBase && r.nextInt(6) == 0) logStart = firstBase + 1 + (long) (r.nextDouble() * (next - firstBase));
            if (logStart > next) logStart = next;
        }

        void legacyPrefix() {
            int sets = 1 + r.nextInt(4);
            byte magic = (byte) r.nextInt(2);
            for (int i = 0; i < sets; i++) {
                if (magic == 0 && r.nextInt(3) == 0) magic = 1;  // the broker was upgraded
                String codec = LEGACY_CODECS[r.nextInt(LEGACY_CODECS.length)];
                TimestampType tt = magic == 0 ? TimestampType.NO_TIMESTAMP_TYPE
                        : r.nextInt(4) == 0 ? TimestampType.LOG_APPEND_TIME : TimestampType.CREATE_TIME;
                int n = 1 + r.nextInt(codec.equals("none") ? 4 : 8);
                legacySet(magic, codec, tt, n);
                maybeGap();
            }
        }

        void v2Data() {
            List<Producer> producers = new ArrayList<>();
            if (r.nextInt(3) != 0) producers.add(new Producer("plain", RecordBatch.NO_PRODUCER_ID, RecordBatch.NO_PRODUCER_EPOCH));
            long pidBase = 1000 + r.nextInt(100000);
            int idem = r.nextInt(3), txnl = r.nextInt(6) == 0 ? 0 : 1 + r.nextInt(4);
            for (int i = 0; i < idem; i++) producers.add(new Producer("idempotent", pidBase + producers.size(), (short) r.nextInt(3)));
            for (int i = 0; i < txnl; i++) producers.add(new Producer("transactional", pidBase + producers.size(), (short) r.nextInt(3)));
            if (producers.isEmpty()) producers.add(new Producer("plain", RecordBatch.NO_PRODUCER_ID, RecordBatch.NO_PRODUCER_EPOCH));
            int target = 10 + r.nextInt(r.nextInt(8) == 0 ? 300 : 100);
            while (records.size() < target) {
                Producer p = producers.get(r.nextInt(producers.size()));
                if (r.nextInt(30) == 0) leaderEpoch++;
                clock += r.nextInt(5000);
                if (!p.kind.equals("transactional")) {
                    if (r.nextInt(15) == 0) emptyBatch(p);
                    else dataBatch(p);
                } else if (p.open == null) {
                    if (r.nextInt(25) == 0) marker(p, r.nextInt(2) == 0);  // a marker with no data here: nothing to end
                    else dataBatch(p);
                } else {
                    int c = r.nextInt(100);
                    if (c < 50) dataBatch(p);
                    else if (c < 56) emptyBatch(p);
                    else marker(p, r.nextInt(100) < 35);
                }
                maybeGap();
            }
            for (Producer p : producers) {  // some transactions stay open (hanging): no marker
                if (p.open != null && r.nextInt(2) == 0) {
                    clock += r.nextInt(5000);
                    marker(p, r.nextBoolean());
                }
            }
        }

        void maybeGap() {
            if (r.nextInt(10) == 0) next += 1 + r.nextInt(r.nextInt(5) == 0 ? 50 : 5);  // whole batches compacted away
        }

        // -- batches

        void dataBatch(Producer p) {
            boolean txn = p.kind.equals("transactional");
            boolean big = r.nextInt(40) == 0;
            int n = big ? 50 + r.nextInt(250) : 1 + r.nextInt(r.nextInt(3) == 0 ? 20 : 6);
            String codec = CODECS[r.nextInt(CODECS.length)];
            TimestampType tt = r.nextInt(5) == 0 ? TimestampType.LOG_APPEND_TIME : TimestampType.CREATE_TIME;
            long base = next;
            long logAppendTime = clock + r.nextInt(1000);
            boolean gaps = r.nextInt(6) == 0;  // a batch the cleaner filtered: base and last offsets kept
            int seq = p.kind.equals("plain") ? RecordBatch.NO_SEQUENCE : p.seq;
            ByteBuffer buf = ByteBuffer.allocate(1024);
            MemoryRecordsBuilder b = MemoryRecords.builder(buf, RecordBatch.MAGIC_VALUE_V2, comp(codec), tt, base,
                    logAppendTime, p.pid, p.epoch, seq, txn, leaderEpoch);
            if (txn && p.open == null) {
                p.open = new Txn(p.pid, base);
                txns.add(p.open);
            }
            long off = base + (gaps && r.nextInt(3) == 0 ? 1 + r.nextInt(3) : 0);
            List<Rec> recs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                if (i > 0) off += 1 + (gaps && r.nextInt(3) == 0 ? 1 + r.nextInt(4) : 0);
                Rec rec = new Rec();
                rec.offset = off;
                long ts = r.nextInt(100) == 0 ? (r.nextBoolean() ? RecordBatch.NO_TIMESTAMP : r.nextInt(1000))
                        : clock - 500 + r.nextInt(1500);
                rec.key = key();
                rec.value = value();
                rec.headers = headers();
                b.appendWithOffset(off, ts, rec.key, rec.value, rec.headers);
                rec.timestamp = tt == TimestampType.LOG_APPEND_TIME ? logAppendTime : ts;
                rec.tsType = tt.id;
                rec.magic = 2;
                rec.pid = p.pid;
                rec.transactional = txn;
                rec.txn = txn ? p.open : null;
                rec.codec = codec;
                recs.add(rec);
            }
            long last = off;
            if (gaps && r.nextInt(3) == 0) {
                last = off + 1 + r.nextInt(3);
                b.overrideLastOffset(last);
            }
            MemoryRecords m = b.build();
            if (!p.kind.equals("plain")) p.seq += (int) (last - base + 1);
            records.addAll(recs);
            append(m, base, last, maxTimestamp(recs));
        }

        void emptyBatch(Producer p) {
            // what the cleaner leaves of an active producer's last batch when all its records went
            long base = next, last = next + r.nextInt(r.nextInt(4) == 0 ? 10 : 2);
            boolean txn = p.kind.equals("transactional");
            TimestampType tt = r.nextInt(5) == 0 ? TimestampType.LOG_APPEND_TIME : TimestampType.CREATE_TIME;
            ByteBuffer buf = ByteBuffer.allocate(DefaultRecordBatch.RECORD_BATCH_OVERHEAD);
            int seq = p.kind.equals("plain") ? RecordBatch.NO_SEQUENCE : p.seq;
            DefaultRecordBatch.writeEmptyHeader(buf, RecordBatch.MAGIC_VALUE_V2, p.pid, p.epoch, seq, base, last,
                    leaderEpoch, tt, clock, txn, false);
            buf.position(0);
            if (!p.kind.equals("plain")) p.seq += (int) (last - base + 1);
            empties.add(new long[]{base, last});
            append(MemoryRecords.readableRecords(buf), base, last, clock);
        }

        void marker(Producer p, boolean abort) {
            long off = next;
            ControlRecordType type = abort ? ControlRecordType.ABORT : ControlRecordType.COMMIT;
            MemoryRecords m = MemoryRecords.withEndTransactionMarker(off, clock, leaderEpoch, p.pid, p.epoch,
                    new EndTransactionMarker(type, r.nextInt(50)));
            boolean stray = p.open == null;
            if (p.open != null) {
                p.open.marker = off;
                p.open.status = abort ? "aborted" : "committed";
                p.open = null;
            }
            markers.add("{\"offset\":" + off + ",\"producer_id\":" + p.pid + ",\"type\":\"" + type.name()
                    + "\",\"stray\":" + stray + ",\"timestamp\":" + clock + "}");
            append(m, off, off, clock);
            if (r.nextInt(4) == 0) p.epoch++;  // transaction version 2 bumps the epoch at each end
        }

        void legacySet(byte magic, String codec, TimestampType tt, int n) {
            long base = next;
            long logAppendTime = clock + r.nextInt(1000);
            boolean gaps = r.nextInt(4) == 0;
            ByteBuffer buf = ByteBuffer.allocate(1024);
            MemoryRecordsBuilder b = MemoryRecords.builder(buf, magic, comp(codec), tt, base, logAppendTime,
                    RecordBatch.NO_PRODUCER_ID, RecordBatch.NO_PRODUCER_EPOCH, RecordBatch.NO_SEQUENCE, false,
                    RecordBatch.NO_PARTITION_LEADER_EPOCH);
            long off = base;
            List<Rec> recs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                if (i > 0) off += 1 + (gaps && r.nextInt(3) == 0 ? 1 + r.nextInt(4) : 0);
                clock += r.nextInt(100);
                Rec rec = new Rec();
                rec.offset = off;
                long ts = magic == 0 ? RecordBatch.NO_TIMESTAMP : clock - 500 + r.nextInt(1500);
                rec.key = key();
                rec.value = value();
                rec.headers = new Header[0];
                b.appendWithOffset(off, ts, rec.key, rec.value);
                rec.timestamp = magic == 0 ? RecordBatch.NO_TIMESTAMP
                        : tt == TimestampType.LOG_APPEND_TIME ? logAppendTime : ts;
                rec.tsType = tt.id;
                rec.magic = magic;
                rec.pid = RecordBatch.NO_PRODUCER_ID;
                rec.codec = codec;
                recs.add(rec);
            }
            MemoryRecords m = b.build();
            records.addAll(recs);
            append(m, base, off, maxTimestamp(recs));
        }

        /** The largest timestamp of a batch of these records (what MemoryRecordsBuilder tracks). */
        static long maxTimestamp(List<Rec> recs) {
            long max = RecordBatch.NO_TIMESTAMP;
            for (Rec rec : recs) max = Math.max(max, rec.timestamp);
            return max;
        }

        /** Appends whole batches [base, last] whose largest timestamp is maxTs, rolling a new segment
         * before them at random. */
        void append(MemoryRecords m, long base, long last, long maxTs) {
            if (segments.isEmpty() || (segments.get(segments.size() - 1).batches > 0 && r.nextDouble() < rollChance)) {
                // a segment is named at or below its first batch (a cleaned segment keeps the name of the first
                // segment it replaced), above every offset of the segment before it
                long lowest = segments.isEmpty() ? nominalStart : prevNext;
                long name = r.nextInt(3) == 0 && base > lowest ? lowest + (long) (r.nextDouble() * (base - lowest + 1)) : base;
                segments.add(new Segment(Math.min(name, base)));
            }
            Segment s = segments.get(segments.size() - 1);
            ByteBuffer bb = m.buffer().duplicate();
            byte[] bytes = new byte[bb.remaining()];
            bb.get(bytes);
            s.bytes.write(bytes, 0, bytes.length);
            int n = 0;
            for (RecordBatch ignored : m.batches()) n++;  // uncompressed legacy messages are one "batch" each
            s.batches += n;
            s.maxTimestamp = Math.max(s.maxTimestamp, maxTs);
            batches += n;
            next = last + 1;
            prevNext = next;
        }

        long prevNext;  // the next offset after the last batch written (before any gap)
        long nominalStart;  // where the partition's offsets begin (the first batches may have been compacted away)

        // -- record contents

        byte[] bytes(int n) {
            byte[] out = new byte[n];
            if (r.nextBoolean()) r.nextBytes(out);
            else for (int i = 0; i < n; i++) out[i] = (byte) ('a' + r.nextInt(26));
            return out;
        }

        byte[] key() {
            int c = r.nextInt(100);
            if (c < 15) return null;
            if (c < 20) return new byte[0];
            return bytes(1 + r.nextInt(16));
        }

        byte[] value() {
            int c = r.nextInt(100);
            if (c < 10) return null;  // a tombstone
            if (c < 15) return new byte[0];
            if (r.nextInt(150) == 0) {  // a large, compressible value
                byte[] unit = bytes(1 + r.nextInt(40));
                byte[] out = new byte[1000 + r.nextInt(15000)];
                for (int i = 0; i < out.length; i++) out[i] = unit[i % unit.length];
                return out;
            }
            return bytes(r.nextInt(r.nextInt(4) == 0 ? 300 : 40));
        }

        Header[] headers() {
            if (r.nextInt(100) < 60) return new Header[0];
            Header[] hs = new Header[1 + r.nextInt(3)];
            for (int i = 0; i < hs.length; i++) {
                int c = r.nextInt(100);
                byte[] v = c < 15 ? null : c < 25 ? new byte[0] : bytes(r.nextInt(30));
                hs[i] = new RecordHeader(HEADER_KEYS[r.nextInt(HEADER_KEYS.length)], v);
            }
            return hs;
        }

        // -- output

        void write(File logDir) throws IOException {
            File dir = new File(logDir, topic + "-" + partition);
            Files.createDirectories(dir.toPath());
            for (Segment s : segments) {
                Files.write(new File(dir, String.format("%020d.log", s.base)).toPath(), s.bytes.toByteArray());
            }
            long lso = next;
            for (Txn t : txns) if (t.status.equals("open")) lso = Math.min(lso, t.first);
            lso = Math.max(lso, logStart);  // UnifiedLog: the first unstable offset is at least the log start
            StringBuilder sb = new StringBuilder(256 + records.size() * 200);
            sb.append("{\"topic\":");
            str(sb, topic);
            sb.append(",\"partition\":").append(partition);
            sb.append(",\"log_start_offset\":").append(logStart);
            sb.append(",\"log_end_offset\":").append(next);
            sb.append(",\"last_stable_offset\":").append(lso);
            sb.append(",\"segments\":[");
            for (int i = 0; i < segments.size(); i++) {
                Segment s = segments.get(i);
                if (i > 0) sb.append(',');
                sb.append("{\"base\":").append(s.base).append(",\"bytes\":").append(s.bytes.size())
                        .append(",\"batches\":").append(s.batches).append(",\"max_timestamp\":")
                        .append(s.maxTimestamp).append('}');
            }
            sb.append("],\"txns\":[");
            for (int i = 0; i < txns.size(); i++) {
                Txn t = txns.get(i);
                if (i > 0) sb.append(',');
                sb.append("{\"producer_id\":").append(t.pid).append(",\"first_offset\":").append(t.first)
                        .append(",\"marker_offset\":").append(t.marker < 0 ? "null" : Long.toString(t.marker))
                        .append(",\"status\":\"").append(t.status).append("\"}");
            }
            sb.append("],\"markers\":[").append(String.join(",", markers)).append("],\"empty_batches\":[");
            for (int i = 0; i < empties.size(); i++) {
                if (i > 0) sb.append(',');
                sb.append('[').append(empties.get(i)[0]).append(',').append(empties.get(i)[1]).append(']');
            }
            sb.append("],\"batches\":").append(batches).append(",\"records\":").append(records.size()).append("}\n");
            for (Rec rec : records) {
                sb.append("{\"offset\":").append(rec.offset).append(",\"key\":");
                b64(sb, rec.key);
                sb.append(",\"value\":");
                b64(sb, rec.value);
                sb.append(",\"timestamp\":").append(rec.timestamp).append(",\"timestamp_type\":").append(rec.tsType);
                sb.append(",\"headers\":[");
                for (int i = 0; i < rec.headers.length; i++) {
                    if (i > 0) sb.append(',');
                    sb.append('[');
                    str(sb, rec.headers[i].key());
                    sb.append(',');
                    b64(sb, rec.headers[i].value());
                    sb.append(']');
                }
                sb.append("],\"producer_id\":").append(rec.pid).append(",\"transactional\":").append(rec.transactional);
                sb.append(",\"txn\":").append(rec.txn == null ? "null" : "\"" + rec.txn.status + "\"");
                sb.append(",\"magic\":").append(rec.magic).append(",\"codec\":\"").append(rec.codec).append("\"}\n");
            }
            Files.writeString(new File(logDir, topic + "-" + partition + ".truth.jsonl").toPath(), sb.toString(),
                    StandardCharsets.UTF_8);
        }
    }

    static void b64(StringBuilder sb, byte[] b) {
        if (b == null) sb.append("null");
        else sb.append('"').append(Base64.getEncoder().encodeToString(b)).append('"');
    }

    /** A JSON string, ASCII only (as Python's json.dumps writes it). */
    static void str(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"') sb.append("\\\"");
            else if (c == '\\') sb.append("\\\\");
            else if (c >= 0x20 && c <= 0x7e) sb.append(c);
            else sb.append("\\u").append(HEX[(c >> 12) & 15]).append(HEX[(c >> 8) & 15])
                        .append(HEX[(c >> 4) & 15]).append(HEX[c & 15]);
        }
        sb.append('"');
    }
}
