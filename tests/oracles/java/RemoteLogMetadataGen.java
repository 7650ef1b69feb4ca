// RemoteLogMetadataGen: a random but plausible __remote_log_metadata partition written with Apache
// Kafka's own serializer, and what Kafka's own metadata store makes of it, for tests of klog's
// remote-log-metadata decoding (tests/oracles/remote_log_metadata_oracle.py). Built and run against the test
// broker's jars (tests/oracles/broker_fixture.py: kafka-storage, kafka-storage-api, kafka-clients 4.1.1).
//   java -cp "<broker jars>:classes" RemoteLogMetadataGen OUT_DIR SEED [EVENTS]
// With java.util.Random(SEED) it makes the tiered-storage history of 1-3 topics of 1-3 partitions
// each (EVENTS events or a few more, default 60): leaders upload segments (RemoteLogSegmentMetadata in
// COPY_SEGMENT_STARTED, then an update to COPY_SEGMENT_FINISHED, or left in progress), retention
// deletes them (DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED), leadership moves (clean hand-overs,
// new leaders that re-upload overlapping ranges, unclean ones whose log diverged from the uploaded
// segments), some updates are sent twice, one partition may be deleted (DELETE_PARTITION_MARKED,
// _STARTED, _FINISHED) and RemoteLogSegmentMetadataSnapshots (apiKey 3) appear among the events.
// Each event is serialized by RemoteLogMetadataSerde into the value of a record with a null key (the
// record's timestamp is the event's), a run of up to 5 consecutive events of one broker per magic v2
// batch (an idempotent producer per broker, as TopicBasedRemoteLogMetadataManager's), written to
// OUT_DIR/__remote_log_metadata-0/00000000000000000000.log.
// The same events are fed in order to RemotePartitionMetadataStore (TopicBasedRemoteLogMetadataManager's
// consumer-side store: every partition loaded first, marked initialized after the last event, as its
// ConsumerTask does) and OUT_DIR/truth.json gets:
//   "events": per record in offset order {"offset", "apiKey" (0 segment metadata, 1 update, 2 partition
//     delete, 3 snapshot), "timestamp", "brokerId", "toString"} and "storeError" (Throwable.toString())
//     when the store threw on it (it throws on every snapshot: it handles apiKeys 0-2 only);
//   "partitions": per topic partition {"topic", "topicId", "partition", "deleted" (a partition delete
//     event of any state was sent), "deleteState" (the last one's state or null), "error" (what
//     listRemoteLogSegments threw, else null), "segments" (listRemoteLogSegments(tip) in its order, a
//     ConcurrentHashMap's: unordered; null on error) each {"segmentId", "startOffset", "endOffset",
//     "state", "brokerId", "segmentLeaderEpochs": {epoch: offset}, "toString"}, "byEpoch" ({epoch:
//     [segmentId...] of listRemoteLogSegments(tip, epoch)} for every epoch of the partition's segment
//     metadata events, a string when that call threw; null on error), "lookup" ({epoch: {offset:
//     segmentId or null}} of remoteLogSegmentMetadata(tip, offset, epoch), the read path's lookup, for
//     the offsets around every segment's and epoch's bounds; null on error), "highestOffset" ({epoch:
//     highestLogOffset(tip, epoch) or null}; null on error)}. Lookups that threw give "error: ...".
//     listRemoteLogSegments returns every segment not yet DELETE_SEGMENT_FINISHED, overlapping or not;
//     only the lookups show which of the overlapping uploads the store chose.
// Prints "#GEN <seed> records=<n>"; exit 2 with the stack trace on error.
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.record.internal.SimpleRecord;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.server.log.remote.metadata.storage.RemoteLogSegmentMetadataSnapshot;
import org.apache.kafka.server.log.remote.metadata.storage.RemotePartitionMetadataStore;
import org.apache.kafka.server.log.remote.metadata.storage.serialization.RemoteLogMetadataSerde;
import org.apache.kafka.server.log.remote.storage.RemoteLogMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentId;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata.CustomMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadataUpdate;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentState;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteMetadata;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteState;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.TreeMap;
import java.util.TreeSet;

public class RemoteLogMetadataGen {
    static final long T0 = 1_700_000_000_000L;
    static final String NAME_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";

    static final class Seg {
        RemoteLogSegmentId id;
        long start, end, maxTs;
        int size, uploader;
        boolean txnIdxEmpty;
        TreeMap<Integer, Long> epochs;
        RemoteLogSegmentState state;
        Optional<CustomMetadata> custom;
    }

    static final class Part {
        TopicIdPartition tip;
        TreeMap<Integer, Long> lineage = new TreeMap<>(); // the current leader's leader-epoch cache
        int epoch, leader;
        long logEnd, copyFrom; // the leader's log end offset; the next offset it will copy
        Seg inflight;
        final List<Seg> segs = new ArrayList<>();
        final List<Seg> deleting = new ArrayList<>(); // DELETE_SEGMENT_STARTED, not yet finished
        boolean gone; // a partition delete was sent: no more events for it
    }

    final Random rng;
    final int target;
    final List<RemoteLogMetadata> events = new ArrayList<>();
    final List<RemoteLogSegmentMetadataUpdate> updates = new ArrayList<>();
    final List<Part> parts = new ArrayList<>();
    final int[] brokers;
    long clock = T0;

    RemoteLogMetadataGen(long seed, int target) {
        this.rng = new Random(seed);
        this.target = target;
        int base = new int[]{0, 1, 100}[rng.nextInt(3)];
        brokers = new int[3 + rng.nextInt(3)];
        for (int i = 0; i < brokers.length; i++) brokers[i] = base + i;
        TreeSet<String> names = new TreeSet<>();
        int topics = 1 + rng.nextInt(3);
        while (names.size() < topics) {
            StringBuilder b = new StringBuilder();
            int len = 3 + rng.nextInt(18);
            for (int i = 0; i < len; i++) b.append(NAME_CHARS.charAt(rng.nextInt(i == 0 ? 52 : NAME_CHARS.length())));
            names.add(b.toString());
        }
        for (String name : names) {
            Uuid topicId = new Uuid(rng.nextLong(), rng.nextLong());
            int partitions = 1 + rng.nextInt(3);
            for (int i = 0; i < partitions; i++) {
                Part p = new Part();
                p.tip = new TopicIdPartition(topicId, i, name);
                p.epoch = rng.nextInt(4) == 0 ? rng.nextInt(20) : 0;
                p.leader = broker();
                p.copyFrom = rng.nextInt(3) == 0 ? rng.nextInt(100_000) : 0; // the log start may be past 0
                p.lineage.put(p.epoch, p.copyFrom);
                p.logEnd = p.copyFrom + 1 + rng.nextInt(500);
                parts.add(p);
            }
        }
    }

    int broker() {
        return brokers[rng.nextInt(brokers.length)];
    }

    long tick() {
        clock += 1 + rng.nextInt(5000);
        return clock;
    }

    Optional<CustomMetadata> custom(double p) {
        if (rng.nextDouble() >= p) return Optional.empty();
        byte[] b = new byte[rng.nextInt(41)];
        rng.nextBytes(b);
        return Optional.of(new CustomMetadata(b));
    }

    void update(Seg s, RemoteLogSegmentState state, int broker, Optional<CustomMetadata> custom) {
        s.state = state;
        s.custom = custom;
        RemoteLogSegmentMetadataUpdate u = new RemoteLogSegmentMetadataUpdate(s.id, tick(), custom, state, broker);
        events.add(u);
        updates.add(u);
    }

    void upload(Part p) {
        p.logEnd = Math.max(p.logEnd, p.copyFrom + 1 + rng.nextInt(400));
        Seg s = new Seg();
        s.id = new RemoteLogSegmentId(p.tip, new Uuid(rng.nextLong(), rng.nextLong()));
        s.start = p.copyFrom;
        s.end = s.start + rng.nextInt((int) Math.min(500, p.logEnd - s.start));
        s.epochs = new TreeMap<>();
        for (Map.Entry<Integer, Long> e : p.lineage.entrySet()) {
            if (e.getValue() > s.start && e.getValue() <= s.end) s.epochs.put(e.getKey(), e.getValue());
        }
        int first = p.lineage.firstKey(); // the epoch of the segment's first offset
        for (Map.Entry<Integer, Long> e : p.lineage.entrySet()) {
            if (e.getValue() <= s.start) first = e.getKey();
        }
        s.epochs.put(first, s.start);
        s.uploader = p.leader;
        s.size = (int) (s.end - s.start + 1) * (50 + rng.nextInt(200));
        s.txnIdxEmpty = rng.nextInt(10) < 7;
        s.state = RemoteLogSegmentState.COPY_SEGMENT_STARTED;
        s.custom = custom(0.15);
        long now = tick();
        s.maxTs = now - 1000 - rng.nextInt(600_000);
        events.add(new RemoteLogSegmentMetadata(s.id, s.start, s.end, s.maxTs, s.uploader, now, s.size, s.custom,
            s.state, s.epochs, s.txnIdxEmpty));
        p.segs.add(s);
        p.inflight = s;
    }

    void leaderChange(Part p) {
        p.inflight = null; // an upload in progress is abandoned
        long lastStart = p.lineage.lastEntry().getValue();
        p.logEnd = Math.max(p.logEnd, lastStart + 2 + rng.nextInt(200));
        int epoch = p.epoch + 1 + (rng.nextInt(5) == 0 ? 1 + rng.nextInt(2) : 0);
        int leader = p.leader;
        if (rng.nextInt(4) != 0) {
            while (leader == p.leader) leader = broker();
        }
        double mode = rng.nextDouble();
        long start = p.logEnd;
        if (mode < 0.3) {
            // unclean: the new leader's log diverged from the old one's at some offset past the last epoch's start
            start = lastStart + 1 + (long) (rng.nextDouble() * (p.logEnd - lastStart - 1));
            if (start < p.copyFrom) {
                Seg floor = null;
                for (Seg s : p.segs) {
                    if (s.start <= start && (floor == null || s.start > floor.start)) floor = s;
                }
                p.copyFrom = floor != null && rng.nextBoolean() ? floor.start : start;
            }
            p.logEnd = start + 1 + rng.nextInt(400);
        } else if (mode < 0.6) {
            // the new leader copies again from an earlier offset: overlapping segments of the same lineage
            List<Seg> earlier = new ArrayList<>();
            for (Seg s : p.segs) {
                if (s.start < p.copyFrom) earlier.add(s);
            }
            if (!earlier.isEmpty()) {
                Seg s = earlier.get(rng.nextInt(earlier.size()));
                p.copyFrom = s.start + (rng.nextBoolean() ? 0 : rng.nextInt((int) (s.end - s.start + 1)));
            }
        }
        final long from = start;
        p.lineage.values().removeIf(offset -> offset >= from);
        while (!p.lineage.isEmpty() && p.lineage.lastKey() >= epoch) p.lineage.remove(p.lineage.lastKey());
        p.lineage.put(epoch, start);
        p.epoch = epoch;
        p.leader = leader;
    }

    void deleteSegment(Part p) {
        List<Seg> candidates = new ArrayList<>();
        for (Seg s : p.segs) {
            if (s != p.inflight && (s.state == RemoteLogSegmentState.COPY_SEGMENT_FINISHED
                || s.state == RemoteLogSegmentState.COPY_SEGMENT_STARTED)) candidates.add(s);
        }
        if (candidates.isEmpty()) {
            upload(p);
            return;
        }
        candidates.sort(Comparator.comparingLong(s -> s.start));
        Seg s = candidates.get(rng.nextInt(10) < 7 ? 0 : rng.nextInt(candidates.size()));
        update(s, RemoteLogSegmentState.DELETE_SEGMENT_STARTED, p.leader, s.custom);
        p.deleting.add(s);
    }

    void deletePartition(Part p) {
        p.gone = true;
        p.inflight = null;
        int broker = p.leader;
        events.add(new RemotePartitionDeleteMetadata(p.tip, RemotePartitionDeleteState.DELETE_PARTITION_MARKED, tick(), broker));
        if (rng.nextInt(100) >= 85) return;
        events.add(new RemotePartitionDeleteMetadata(p.tip, RemotePartitionDeleteState.DELETE_PARTITION_STARTED, tick(), broker));
        boolean all = true;
        List<Seg> segs = new ArrayList<>(p.segs);
        segs.sort(Comparator.comparingLong(s -> s.start));
        for (Seg s : segs) {
            if (s.state == RemoteLogSegmentState.DELETE_SEGMENT_FINISHED) continue;
            if (s.state != RemoteLogSegmentState.DELETE_SEGMENT_STARTED) {
                update(s, RemoteLogSegmentState.DELETE_SEGMENT_STARTED, broker, s.custom);
            }
            if (rng.nextInt(100) < 92) {
                update(s, RemoteLogSegmentState.DELETE_SEGMENT_FINISHED, broker, s.custom);
            } else {
                all = false;
            }
        }
        if (all && rng.nextInt(100) < 85) {
            events.add(new RemotePartitionDeleteMetadata(p.tip, RemotePartitionDeleteState.DELETE_PARTITION_FINISHED, tick(), broker));
        }
    }

    void snapshot() {
        List<Seg> all = new ArrayList<>();
        for (Part p : parts) all.addAll(p.segs);
        Seg s = all.get(rng.nextInt(all.size()));
        events.add(new RemoteLogSegmentMetadataSnapshot(s.id.id(), s.start, s.end, s.maxTs, s.uploader, tick(), s.size,
            s.custom, s.state, s.epochs, s.txnIdxEmpty));
    }

    void generate() {
        Part victim = parts.size() > 1 || rng.nextBoolean() ? parts.get(rng.nextInt(parts.size())) : null;
        int deleteAt = (int) (target * (0.6 + 0.25 * rng.nextDouble()));
        int snapshots = 1 + (rng.nextInt(4) == 0 ? 1 : 0);
        List<Integer> snapshotAt = new ArrayList<>();
        for (int i = 0; i < snapshots; i++) snapshotAt.add(target / 5 + rng.nextInt(Math.max(1, target * 3 / 5)));
        while (events.size() < target) {
            if (!snapshotAt.isEmpty() && events.size() >= snapshotAt.get(0) && parts.stream().anyMatch(x -> !x.segs.isEmpty())) {
                snapshotAt.remove(0);
                snapshot();
                continue;
            }
            if (victim != null && !victim.gone && events.size() >= deleteAt) {
                deletePartition(victim);
                continue;
            }
            List<Part> live = new ArrayList<>();
            for (Part x : parts) {
                if (!x.gone) live.add(x);
            }
            if (live.isEmpty()) break;
            Part p = live.get(rng.nextInt(live.size()));
            p.logEnd += rng.nextInt(300);
            double r = rng.nextDouble();
            if (p.inflight != null) {
                Seg s = p.inflight;
                if (r < 0.8) {
                    update(s, RemoteLogSegmentState.COPY_SEGMENT_FINISHED, s.uploader, custom(0.4));
                    p.copyFrom = s.end + 1;
                    p.inflight = null;
                } else if (r < 0.9) {
                    p.inflight = null; // the copy failed: left in COPY_SEGMENT_STARTED, the range is copied again
                } else {
                    leaderChange(p);
                }
            } else if (r < 0.5) {
                upload(p);
            } else if (r < 0.65) {
                deleteSegment(p);
            } else if (r < 0.8 && !p.deleting.isEmpty()) {
                Seg s = p.deleting.remove(rng.nextInt(p.deleting.size()));
                update(s, RemoteLogSegmentState.DELETE_SEGMENT_FINISHED, p.leader, s.custom);
            } else if (r < 0.9) {
                leaderChange(p);
            } else if (r < 0.95 && updates.stream().anyMatch(u -> u.topicIdPartition().equals(p.tip))) {
                // a retried update: the same one again, later (the store re-applies or drops it)
                List<RemoteLogSegmentMetadataUpdate> mine = updates.stream().filter(u -> u.topicIdPartition().equals(p.tip)).toList();
                RemoteLogSegmentMetadataUpdate u = mine.get(rng.nextInt(mine.size()));
                events.add(new RemoteLogSegmentMetadataUpdate(u.remoteLogSegmentId(), tick(), u.customMetadata(),
                    u.state(), u.brokerId()));
            } else {
                upload(p);
            }
        }
        if (snapshotAt.size() == snapshots && parts.stream().anyMatch(x -> !x.segs.isEmpty())) snapshot();
    }

    /** The record values: each event as RemoteLogMetadataSerde serializes it. */
    byte[][] serialize(RemoteLogMetadataSerde serde) {
        byte[][] values = new byte[events.size()][];
        for (int i = 0; i < values.length; i++) values[i] = serde.serialize(events.get(i));
        return values;
    }

    /** The batches: runs of consecutive events of one broker, at most 5 per batch, one producer per broker. */
    void writeLog(Path file, byte[][] values) throws Exception {
        Files.createDirectories(file.getParent());
        Map<Integer, Integer> sequences = new HashMap<>();
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
            StandardOpenOption.TRUNCATE_EXISTING)) {
            int i = 0;
            while (i < values.length) {
                int broker = events.get(i).brokerId();
                int max = 1 + rng.nextInt(5);
                int n = 1;
                while (n < max && i + n < values.length && events.get(i + n).brokerId() == broker) n++;
                SimpleRecord[] records = new SimpleRecord[n];
                for (int j = 0; j < n; j++) {
                    records[j] = new SimpleRecord(events.get(i + j).eventTimestampMs(), null, values[i + j]);
                }
                int seq = sequences.getOrDefault(broker, 0);
                sequences.put(broker, seq + n);
                MemoryRecords batch = MemoryRecords.withRecords(RecordBatch.MAGIC_VALUE_V2, i, Compression.NONE,
                    TimestampType.CREATE_TIME, 1000L + broker, (short) 0, seq, 0, false, records);
                ByteBuffer buf = batch.buffer();
                while (buf.hasRemaining()) ch.write(buf);
                i += n;
            }
        }
    }

    static Object call(Method m, Object target, Object... args) throws Throwable {
        try {
            return m.invoke(target, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }

    String truth(RemoteLogMetadataSerde serde, byte[][] values) throws Exception {
        RemotePartitionMetadataStore store = new RemotePartitionMetadataStore();
        for (Part p : parts) store.maybeLoadPartition(p.tip);
        StringBuilder out = new StringBuilder("{\"events\": [\n");
        Map<TopicIdPartition, TreeSet<Integer>> epochs = new HashMap<>();
        Map<TopicIdPartition, TreeSet<Long>> probes = new HashMap<>(); // offsets around the segments' bounds
        Map<TopicIdPartition, RemotePartitionDeleteState> deletes = new HashMap<>();
        for (int i = 0; i < values.length; i++) {
            RemoteLogMetadata m = serde.deserialize(values[i]); // what a consumer of the topic gets
            if (!m.toString().equals(events.get(i).toString())) {
                throw new IllegalStateException("serde round trip differs: " + m + " != " + events.get(i));
            }
            int apiKey = m instanceof RemoteLogSegmentMetadata ? 0 : m instanceof RemoteLogSegmentMetadataUpdate ? 1
                : m instanceof RemotePartitionDeleteMetadata ? 2 : 3;
            if (m instanceof RemoteLogSegmentMetadata s) {
                epochs.computeIfAbsent(s.topicIdPartition(), k -> new TreeSet<>()).addAll(s.segmentLeaderEpochs().keySet());
                TreeSet<Long> probe = probes.computeIfAbsent(s.topicIdPartition(), k -> new TreeSet<>());
                for (long o : s.segmentLeaderEpochs().values()) probe.addAll(List.of(o - 1, o));
                probe.addAll(List.of(s.startOffset() - 1, s.startOffset(), s.endOffset(), s.endOffset() + 1));
                probe.remove(-1L);
            } else if (m instanceof RemotePartitionDeleteMetadata d) {
                deletes.put(d.topicIdPartition(), d.state());
            }
            String error = null;
            try {
                store.handleRemoteLogMetadata(m);
            } catch (RuntimeException e) {
                error = e.toString();
            }
            out.append(i == 0 ? "  " : ",\n  ").append("{\"offset\": ").append(i).append(", \"apiKey\": ").append(apiKey)
                .append(", \"timestamp\": ").append(m.eventTimestampMs()).append(", \"brokerId\": ").append(m.brokerId())
                .append(", \"toString\": ").append(json(m.toString()));
            if (error != null) out.append(", \"storeError\": ").append(json(error));
            out.append('}');
        }
        for (Part p : parts) {
            try {
                store.markInitialized(p.tip);
            } catch (RuntimeException e) {
                // the partition's cache is gone (DELETE_PARTITION_FINISHED): its queries throw below
            }
        }
        Method all = RemotePartitionMetadataStore.class.getDeclaredMethod("listRemoteLogSegments", TopicIdPartition.class);
        Method byEpoch = RemotePartitionMetadataStore.class.getDeclaredMethod("listRemoteLogSegments", TopicIdPartition.class, int.class);
        Method lookup = RemotePartitionMetadataStore.class.getDeclaredMethod("remoteLogSegmentMetadata", TopicIdPartition.class, long.class, int.class);
        Method highest = RemotePartitionMetadataStore.class.getDeclaredMethod("highestLogOffset", TopicIdPartition.class, int.class);
        for (Method m : List.of(all, byEpoch, lookup, highest)) m.setAccessible(true);
        out.append("\n],\n\"partitions\": [\n");
        boolean first = true;
        for (Part p : parts) {
            RemotePartitionDeleteState del = deletes.get(p.tip);
            out.append(first ? "  " : ",\n  ").append("{\"topic\": ").append(json(p.tip.topic()))
                .append(", \"topicId\": ").append(json(p.tip.topicId().toString()))
                .append(", \"partition\": ").append(p.tip.partition())
                .append(", \"deleted\": ").append(del != null)
                .append(", \"deleteState\": ").append(del == null ? "null" : json(del.toString()));
            first = false;
            StringBuilder segs = new StringBuilder();
            try {
                @SuppressWarnings("unchecked")
                Iterator<RemoteLogSegmentMetadata> it = (Iterator<RemoteLogSegmentMetadata>) call(all, store, p.tip);
                boolean firstSeg = true;
                while (it.hasNext()) {
                    RemoteLogSegmentMetadata s = it.next();
                    segs.append(firstSeg ? "\n    " : ",\n    ").append("{\"segmentId\": ").append(json(s.remoteLogSegmentId().id().toString()))
                        .append(", \"startOffset\": ").append(s.startOffset())
                        .append(", \"endOffset\": ").append(s.endOffset())
                        .append(", \"state\": ").append(json(s.state().toString()))
                        .append(", \"brokerId\": ").append(s.brokerId())
                        .append(", \"segmentLeaderEpochs\": {");
                    boolean firstEpoch = true;
                    for (Map.Entry<Integer, Long> e : s.segmentLeaderEpochs().entrySet()) {
                        segs.append(firstEpoch ? "" : ", ").append(json(e.getKey().toString())).append(": ").append(e.getValue());
                        firstEpoch = false;
                    }
                    segs.append("}, \"toString\": ").append(json(s.toString())).append('}');
                    firstSeg = false;
                }
            } catch (Throwable e) {
                out.append(", \"error\": ").append(json(e.toString())).append(", \"segments\": null, \"byEpoch\": null, \"lookup\": null, \"highestOffset\": null}");
                continue;
            }
            out.append(", \"error\": null, \"segments\": [").append(segs).append(segs.length() == 0 ? "]" : "\n  ]")
                .append(", \"byEpoch\": {");
            boolean firstEpoch = true;
            for (int epoch : epochs.getOrDefault(p.tip, new TreeSet<>())) {
                out.append(firstEpoch ? "" : ", ").append(json(Integer.toString(epoch))).append(": ");
                firstEpoch = false;
                try {
                    @SuppressWarnings("unchecked")
                    Iterator<RemoteLogSegmentMetadata> it = (Iterator<RemoteLogSegmentMetadata>) call(byEpoch, store, p.tip, epoch);
                    out.append('[');
                    boolean firstId = true;
                    while (it.hasNext()) {
                        out.append(firstId ? "" : ", ").append(json(it.next().remoteLogSegmentId().id().toString()));
                        firstId = false;
                    }
                    out.append(']');
                } catch (Throwable e) {
                    out.append(json(e.toString()));
                }
            }
            out.append("}, \"lookup\": {");
            firstEpoch = true;
            for (int epoch : epochs.getOrDefault(p.tip, new TreeSet<>())) {
                out.append(firstEpoch ? "" : ", ").append(json(Integer.toString(epoch))).append(": {");
                firstEpoch = false;
                boolean firstOffset = true;
                for (long offset : probes.get(p.tip)) {
                    String found;
                    try {
                        @SuppressWarnings("unchecked")
                        Optional<RemoteLogSegmentMetadata> m = (Optional<RemoteLogSegmentMetadata>) call(lookup, store, p.tip, offset, epoch);
                        found = m.map(x -> json(x.remoteLogSegmentId().id().toString())).orElse("null");
                    } catch (Throwable e) {
                        found = json("error: " + e);
                    }
                    out.append(firstOffset ? "" : ", ").append(json(Long.toString(offset))).append(": ").append(found);
                    firstOffset = false;
                }
                out.append('}');
            }
            out.append("}, \"highestOffset\": {");
            firstEpoch = true;
            for (int epoch : epochs.getOrDefault(p.tip, new TreeSet<>())) {
                out.append(firstEpoch ? "" : ", ").append(json(Integer.toString(epoch))).append(": ");
                firstEpoch = false;
                try {
                    @SuppressWarnings("unchecked")
                    Optional<Long> h = (Optional<Long>) call(highest, store, p.tip, epoch);
                    out.append(h.map(String::valueOf).orElse("null"));
                } catch (Throwable e) {
                    out.append(json("error: " + e));
                }
            }
            out.append("}}");
        }
        return out.append("\n]}\n").toString();
    }

    static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20 || c > 0x7e) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
                }
            }
        }
        return b.append('"').toString();
    }

    public static void main(String[] args) {
        System.setProperty("log4j2.level", "OFF"); // the store logs the transitions it drops at ERROR
        try {
            Path out = Path.of(args[0]);
            long seed = Long.parseLong(args[1]);
            int target = args.length > 2 ? Integer.parseInt(args[2]) : 60;
            RemoteLogMetadataGen gen = new RemoteLogMetadataGen(seed, target);
            gen.generate();
            RemoteLogMetadataSerde serde = new RemoteLogMetadataSerde();
            byte[][] values = gen.serialize(serde);
            gen.writeLog(out.resolve("__remote_log_metadata-0").resolve("00000000000000000000.log"), values);
            Files.writeString(out.resolve("truth.json"), gen.truth(serde, values), StandardCharsets.UTF_8);
            System.out.println("#GEN " + seed + " records=" + values.length);
        } catch (Throwable e) {
            e.printStackTrace();
            System.exit(2);
        }
    }
}
