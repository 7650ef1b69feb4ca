import java.io.BufferedWriter;
import java.io.FileOutputStream;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka's own clients against a running broker, for klog's broker tests (tests/oracles/broker_fixture.py).
 *
 * <pre>
 * BrokerClient workload BOOTSTRAP SEED PREFIX RECORDS
 *     creates the topics of one random workload (PREFIX-*) and produces about RECORDS records into
 *     them: plain, idempotent and transactional producers (commits, aborts, interleaved, with
 *     sendOffsetsToTransaction), every codec, headers, null keys and values, LogAppendTime, small
 *     segments, retention by size, a compacted topic with tombstones; then consumer groups of the
 *     classic and the consumer (KIP-848) protocols commit offsets. Prints one JSON line per topic.
 * BrokerClient create BOOTSTRAP TOPIC PARTITIONS [NAME=VALUE...]
 *     creates a topic with those topic configs.
 * BrokerClient produce BOOTSTRAP TOPIC RECORDS SEED KIND CODEC
 *     RECORDS random records (keys, nulls, headers) from a KIND producer (plain | idempotent |
 *     txn: transactions of up to 100 records, a third of them aborted), compressed with CODEC.
 * BrokerClient consume BOOTSTRAP ISOLATION OUT TOPIC...
 *     every record of the topics from the log start to the end (the LSO at read_committed), as a
 *     KafkaConsumer at ISOLATION (read_committed | read_uncommitted) returns them, one JSON line
 *     each into OUT.
 * BrokerClient admin BOOTSTRAP TOPIC... [@TIMESTAMP...]
 *     one JSON document: per partition ListOffsets (earliest, latest at both isolation levels,
 *     max-timestamp, and for each @TIMESTAMP given), topic ids, the topics' configs set on the
 *     topic, and every consumer group's committed offsets.
 * BrokerClient keyed BOOTSTRAP SEED TOPIC PARTITIONS RECORDS [NAME=VALUE...]
 *     creates TOPIC with the configs given and produces about RECORDS keyed records into it
 *     (rewritten keys, tombstones, headers, an idempotent and a transactional producer committing
 *     and aborting, every codec), then returns: it does not wait for the cleaner.
 * BrokerClient alter BOOTSTRAP TOPIC NAME=VALUE...
 *     sets the topic's configs (incrementalAlterConfigs).
 * </pre>
 */
public class BrokerClient {
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "workload":
                workload(args[1], Long.parseLong(args[2]), args[3], Integer.parseInt(args[4]));
                break;
            case "create":
                create(args[1], args[2], Integer.parseInt(args[3]), List.of(args).subList(4, args.length));
                break;
            case "produce":
                produce(args[1], args[2], Integer.parseInt(args[3]), Long.parseLong(args[4]), args[5], args[6]);
                break;
            case "consume":
                consume(args[1], args[2], args[3], List.of(args).subList(4, args.length));
                break;
            case "admin":
                List<String> topics = new ArrayList<>();
                List<Long> probes = new ArrayList<>();
                for (String a : List.of(args).subList(2, args.length)) {
                    if (a.startsWith("@")) {
                        probes.add(Long.parseLong(a.substring(1)));
                    } else {
                        topics.add(a);
                    }
                }
                admin(args[1], topics, probes);
                break;
            case "keyed":
                keyed(args[1], Long.parseLong(args[2]), args[3], Integer.parseInt(args[4]), Integer.parseInt(args[5]),
                        configArgs(args, 6));
                break;
            case "alter":
                alter(args[1], args[2], configArgs(args, 3));
                break;
            default:
                throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }

    // ---------------------------------------------------------------- workload

    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return Admin.create(p);
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, String kind, String codec, Random r, String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.LINGER_MS_CONFIG, Integer.toString(r.nextInt(5)));
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, Integer.toString(1024 << r.nextInt(6)));
        if (kind.equals("plain")) {
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
            p.put(ProducerConfig.ACKS_CONFIG, "1");
        } else {
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
            p.put(ProducerConfig.ACKS_CONFIG, "all");
        }
        if (txnId != null) {
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        }
        return new KafkaProducer<>(p);
    }

    static byte[] bytes(Random r, int max) {
        byte[] b = new byte[r.nextInt(max + 1)];
        if (r.nextInt(3) == 0) {
            r.nextBytes(b);  // incompressible
        } else {
            for (int i = 0; i < b.length; i++) {
                b[i] = (byte) ('a' + r.nextInt(4));  // compressible
            }
        }
        return b;
    }

    static ProducerRecord<byte[], byte[]> record(Random r, String topic, int partitions, boolean compacted, int keySpace) {
        byte[] key;
        if (compacted) {
            key = ("k" + r.nextInt(keySpace)).getBytes(StandardCharsets.UTF_8);
        } else {
            key = r.nextInt(5) == 0 ? null : bytes(r, 24);
        }
        byte[] value = r.nextInt(compacted ? 6 : 10) == 0 ? null : bytes(r, 300);
        List<Header> headers = new ArrayList<>();
        int nh = r.nextInt(4) == 0 ? 1 + r.nextInt(3) : 0;
        for (int i = 0; i < nh; i++) {
            headers.add(new RecordHeader("h" + r.nextInt(3), r.nextInt(6) == 0 ? null : bytes(r, 16)));
        }
        Integer partition = r.nextInt(3) == 0 ? Integer.valueOf(r.nextInt(partitions)) : null;
        if (key == null && partition == null) {
            partition = r.nextInt(partitions);
        }
        // CreateTime: mostly the producer's clock, sometimes a chosen time (older, or out of order)
        Long ts = r.nextInt(4) == 0 ? Long.valueOf(System.currentTimeMillis() - r.nextInt(3_600_000)) : null;
        return new ProducerRecord<>(topic, partition, ts, key, value, headers);
    }

    static void createTopic(Admin admin, String name, int partitions, Map<String, String> configs) throws Exception {
        NewTopic t = new NewTopic(name, partitions, (short) 1).configs(configs);
        admin.createTopics(List.of(t)).all().get();
    }

    static void workload(String bootstrap, long seed, String prefix, int records) throws Exception {
        Random r = new Random(seed);
        PrintStream out = System.out;
        String plain = prefix + "-plain";
        String txn = prefix + "-txn";
        String retained = prefix + "-retained";
        String compacted = prefix + "-compacted";
        int plainParts = 1 + r.nextInt(3);
        int txnParts = 1 + r.nextInt(3);
        Map<String, Map<String, String>> configs = new LinkedHashMap<>();
        Map<String, String> c = new TreeMap<>();
        c.put("internal.segment.bytes", Integer.toString(32768 << r.nextInt(3)));
        if (r.nextBoolean()) {
            c.put("message.timestamp.type", "LogAppendTime");
        }
        configs.put(plain, c);
        c = new TreeMap<>();
        c.put("internal.segment.bytes", Integer.toString(32768 << r.nextInt(2)));
        configs.put(txn, c);
        c = new TreeMap<>();
        c.put("internal.segment.bytes", "32768");
        c.put("retention.bytes", Integer.toString(65536 << r.nextInt(2)));
        configs.put(retained, c);
        c = new TreeMap<>();
        c.put("cleanup.policy", "compact");
        c.put("internal.segment.bytes", "32768");
        c.put("min.cleanable.dirty.ratio", "0.01");
        c.put("segment.ms", "100");
        // tombstones kept a day: a second cleaning pass that removes them would change the topic
        // after the truth is read (the first pass stamps their batches with the delete horizon)
        c.put("delete.retention.ms", "86400000");
        configs.put(compacted, c);
        Map<String, Integer> parts = Map.of(plain, plainParts, txn, txnParts, retained, 1, compacted, 1 + r.nextInt(2));
        try (Admin admin = admin(bootstrap)) {
            for (Map.Entry<String, Map<String, String>> e : configs.entrySet()) {
                createTopic(admin, e.getKey(), parts.get(e.getKey()), e.getValue());
            }
        }
        int perPhase = Math.max(1, records / 4);

        // plain and idempotent producers, every codec
        for (String kind : new String[] {"plain", "idempotent"}) {
            for (int i = 0; i < 2; i++) {
                try (KafkaProducer<byte[], byte[]> p = producer(bootstrap, kind, CODECS[r.nextInt(CODECS.length)], r, null)) {
                    for (int n = 0; n < perPhase / 4; n++) {
                        p.send(record(r, plain, plainParts, false, 0));
                        if (r.nextInt(500) == 0) {
                            p.flush();
                        }
                    }
                }
            }
        }

        // two transactional producers, interleaved, committing and aborting, offsets sent to a group
        String txGroup = prefix + "-txgroup";
        KafkaProducer<byte[], byte[]> t1 = producer(bootstrap, "txn", CODECS[r.nextInt(CODECS.length)], r, prefix + "-tx1");
        KafkaProducer<byte[], byte[]> t2 = producer(bootstrap, "txn", CODECS[r.nextInt(CODECS.length)], r, prefix + "-tx2");
        t1.initTransactions();
        t2.initTransactions();
        int written = 0;
        long fakeOffset = 0;
        while (written < perPhase) {
            List<KafkaProducer<byte[], byte[]>> active = new ArrayList<>();
            for (KafkaProducer<byte[], byte[]> p : List.of(t1, t2)) {
                if (r.nextInt(4) != 0) {
                    p.beginTransaction();
                    active.add(p);
                }
            }
            int n = 1 + r.nextInt(400);
            for (int i = 0; i < n && !active.isEmpty(); i++) {
                KafkaProducer<byte[], byte[]> p = active.get(r.nextInt(active.size()));
                p.send(record(r, txn, txnParts, false, 0));
                written++;
            }
            for (KafkaProducer<byte[], byte[]> p : active) {
                if (r.nextInt(3) == 0) {
                    fakeOffset += r.nextInt(50);
                    p.sendOffsetsToTransaction(Map.of(new TopicPartition(plain, 0), new OffsetAndMetadata(fakeOffset, "tx")),
                            new org.apache.kafka.clients.consumer.ConsumerGroupMetadata(txGroup));
                }
                p.flush();
                if (r.nextInt(3) == 0) {
                    p.abortTransaction();
                } else {
                    p.commitTransaction();
                }
            }
        }
        t1.close();
        t2.close();

        // retention by size deletes segments while this runs
        try (KafkaProducer<byte[], byte[]> p = producer(bootstrap, "idempotent", CODECS[r.nextInt(CODECS.length)], r, null)) {
            for (int n = 0; n < perPhase; n++) {
                p.send(record(r, retained, 1, false, 0));
                if (n % 2000 == 1999) {
                    p.flush();
                    Thread.sleep(50);
                }
            }
        }

        // a compacted topic: keys rewritten, tombstones, some transactional writes
        produceCompacted(bootstrap, r, compacted, parts.get(compacted), perPhase, 50 + r.nextInt(500), prefix + "-ctx",
                5, 50, 1000, 20);

        // consumer groups commit offsets: the classic protocol and the consumer protocol (KIP-848)
        for (String protocol : new String[] {"classic", "consumer"}) {
            String group = prefix + "-" + protocol;
            Properties p = consumerProps(bootstrap, "read_committed");
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            p.put("group.protocol", protocol);
            p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
                consumer.subscribe(List.of(plain, txn));
                long deadline = System.currentTimeMillis() + 30_000;
                while (consumer.assignment().size() < plainParts + txnParts && System.currentTimeMillis() < deadline) {
                    consumer.poll(Duration.ofMillis(100));
                }
                Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
                for (TopicPartition tp : consumer.assignment()) {
                    long end = consumer.endOffsets(List.of(tp)).get(tp);
                    commit.put(tp, new OffsetAndMetadata(end == 0 ? 0 : r.nextInt((int) end + 1), "m" + r.nextInt(100)));
                }
                consumer.commitSync(commit);
            }
        }
        for (Map.Entry<String, Map<String, String>> e : configs.entrySet()) {
            out.println("{\"topic\":" + str(e.getKey()) + ",\"partitions\":" + parts.get(e.getKey()) + "}");
        }
    }

    static void create(String bootstrap, String topic, int partitions, List<String> configs) throws Exception {
        Map<String, String> c = new TreeMap<>();
        for (String kv : configs) {
            int eq = kv.indexOf('=');
            c.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        try (Admin admin = admin(bootstrap)) {
            createTopic(admin, topic, partitions, c);
        }
    }

    static void produce(String bootstrap, String topic, int records, long seed, String kind, String codec) throws Exception {
        Random r = new Random(seed);
        int partitions;
        try (Admin admin = admin(bootstrap)) {
            partitions = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
        }
        boolean compacted = topic.contains("compact");
        String txnId = kind.equals("txn") ? topic + "-tx-" + seed : null;
        try (KafkaProducer<byte[], byte[]> p = producer(bootstrap, kind, codec, r, txnId)) {
            if (txnId != null) {
                p.initTransactions();
            }
            int n = 0;
            while (n < records) {
                int k = txnId == null ? records : Math.min(records - n, 1 + r.nextInt(100));
                if (txnId != null) {
                    p.beginTransaction();
                }
                for (int i = 0; i < k; i++, n++) {
                    p.send(record(r, topic, partitions, compacted, 200));
                }
                if (txnId != null) {
                    if (r.nextInt(3) == 0) {
                        p.abortTransaction();
                    } else {
                        p.commitTransaction();
                    }
                }
            }
            p.flush();
        }
    }

    // ---------------------------------------------------------------- keyed, alter

    static Map<String, String> configArgs(String[] args, int from) {
        Map<String, String> out = new TreeMap<>();
        for (String a : List.of(args).subList(from, args.length)) {
            int eq = a.indexOf('=');
            out.put(a.substring(0, eq), a.substring(eq + 1));
        }
        return out;
    }

    static void keyed(String bootstrap, long seed, String topic, int partitions, int records, Map<String, String> configs)
            throws Exception {
        Random r = new Random(seed);
        try (Admin admin = admin(bootstrap)) {
            createTopic(admin, topic, partitions, configs);
        }
        produceCompacted(bootstrap, r, topic, partitions, records, 50 + r.nextInt(300), topic + "-tx", 6, 40, 500, 0);
    }

    /**
     * Keyed records (tombstones among them) into a compacted topic: mostly from an idempotent
     * producer; one write in {@code txnOneIn} is a transaction of up to {@code maxTxn} records from a
     * transactional producer, a third of them aborted. Every {@code flushEvery} records a flush and a
     * pause of {@code pauseMs}, so that segments roll and the cleaner runs meanwhile.
     */
    static void produceCompacted(String bootstrap, Random r, String topic, int partitions, int records, int keySpace,
                                 String txnId, int txnOneIn, int maxTxn, int flushEvery, long pauseMs) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = producer(bootstrap, "idempotent", CODECS[r.nextInt(CODECS.length)], r, null);
             KafkaProducer<byte[], byte[]> tp = producer(bootstrap, "txn", CODECS[r.nextInt(CODECS.length)], r, txnId)) {
            tp.initTransactions();
            for (int n = 0; n < records; ) {
                if (r.nextInt(txnOneIn) == 0) {
                    tp.beginTransaction();
                    int k = 1 + r.nextInt(maxTxn);
                    for (int i = 0; i < k; i++, n++) {
                        tp.send(record(r, topic, partitions, true, keySpace));
                    }
                    if (r.nextInt(3) == 0) {
                        tp.abortTransaction();
                    } else {
                        tp.commitTransaction();
                    }
                } else {
                    p.send(record(r, topic, partitions, true, keySpace));
                    n++;
                }
                if (n % flushEvery == 0) {
                    p.flush();
                    if (pauseMs > 0) {
                        Thread.sleep(pauseMs);
                    }
                }
            }
        }
    }

    static void alter(String bootstrap, String topic, Map<String, String> configs) throws Exception {
        List<org.apache.kafka.clients.admin.AlterConfigOp> ops = new ArrayList<>();
        for (Map.Entry<String, String> e : configs.entrySet()) {
            ops.add(new org.apache.kafka.clients.admin.AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue()),
                    org.apache.kafka.clients.admin.AlterConfigOp.OpType.SET));
        }
        try (Admin admin = admin(bootstrap)) {
            admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.TOPIC, topic), ops)).all().get();
        }
    }

    // ---------------------------------------------------------------- consume

    static Properties consumerProps(String bootstrap, String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "5000");
        return p;
    }

    static void consume(String bootstrap, String isolation, String outPath, List<String> topics) throws Exception {
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps(bootstrap, isolation));
             BufferedWriter w = new BufferedWriter(new OutputStreamWriter(new FileOutputStream(outPath), StandardCharsets.UTF_8))) {
            List<TopicPartition> tps = new ArrayList<>();
            for (String t : topics) {
                for (var info : consumer.partitionsFor(t)) {
                    tps.add(new TopicPartition(t, info.partition()));
                }
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = consumer.endOffsets(tps);  // the LSO at read_committed
            Set<TopicPartition> open = new TreeSet<>((a, b) -> a.toString().compareTo(b.toString()));
            for (TopicPartition tp : tps) {
                if (consumer.position(tp) < ends.get(tp)) {
                    open.add(tp);
                }
            }
            StringBuilder sb = new StringBuilder();
            long idle = System.currentTimeMillis();
            while (!open.isEmpty()) {
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> rec : recs) {
                    sb.setLength(0);
                    sb.append("{\"t\":").append(str(rec.topic())).append(",\"p\":").append(rec.partition())
                      .append(",\"o\":").append(rec.offset()).append(",\"ts\":").append(rec.timestamp())
                      .append(",\"tt\":").append(rec.timestampType().id).append(",\"k\":").append(b64(rec.key()))
                      .append(",\"v\":").append(b64(rec.value())).append(",\"h\":[");
                    boolean first = true;
                    for (Header h : rec.headers()) {
                        sb.append(first ? "" : ",").append("[").append(str(h.key())).append(",").append(b64(h.value())).append("]");
                        first = false;
                    }
                    sb.append("]}\n");
                    w.write(sb.toString());
                }
                for (TopicPartition tp : new ArrayList<>(open)) {
                    if (consumer.position(tp) >= ends.get(tp)) {
                        open.remove(tp);
                    }
                }
                if (!recs.isEmpty()) {
                    idle = System.currentTimeMillis();
                } else if (System.currentTimeMillis() - idle > 60_000) {
                    throw new IllegalStateException("no progress towards " + ends + " from " + open);
                }
            }
        }
    }

    // ---------------------------------------------------------------- admin

    static void admin(String bootstrap, List<String> topics, List<Long> probes) throws Exception {
        StringBuilder sb = new StringBuilder("{");
        try (Admin admin = admin(bootstrap)) {
            Map<String, TopicDescription> desc = admin.describeTopics(topics).allTopicNames().get();
            List<TopicPartition> tps = new ArrayList<>();
            sb.append("\"topics\":{");
            boolean first = true;
            for (String t : topics) {
                TopicDescription d = desc.get(t);
                sb.append(first ? "" : ",").append(str(t)).append(":{\"id\":").append(str(d.topicId().toString()))
                  .append(",\"partitions\":").append(d.partitions().size()).append(",\"configs\":{");
                first = false;
                for (TopicPartitionInfo info : d.partitions()) {
                    tps.add(new TopicPartition(t, info.partition()));
                }
                ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, t);
                Config config = admin.describeConfigs(List.of(res)).all().get().get(res);
                boolean f2 = true;
                for (ConfigEntry e : config.entries()) {
                    if (e.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG) {
                        sb.append(f2 ? "" : ",").append(str(e.name())).append(":").append(str(e.value()));
                        f2 = false;
                    }
                }
                sb.append("}}");
            }
            sb.append("},\"offsets\":{");
            Map<String, Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo>> specs = new LinkedHashMap<>();
            specs.put("earliest", listOffsets(admin, tps, OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED));
            specs.put("latest", listOffsets(admin, tps, OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED));
            specs.put("lso", listOffsets(admin, tps, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED));
            specs.put("maxTimestamp", listOffsets(admin, tps, OffsetSpec.maxTimestamp(), IsolationLevel.READ_UNCOMMITTED));
            for (long ts : probes) {
                specs.put("@" + ts, listOffsets(admin, tps, OffsetSpec.forTimestamp(ts), IsolationLevel.READ_UNCOMMITTED));
            }
            first = true;
            for (TopicPartition tp : tps) {
                sb.append(first ? "" : ",").append(str(tp.toString())).append(":{");
                first = false;
                boolean f2 = true;
                for (var e : specs.entrySet()) {
                    var info = e.getValue().get(tp);
                    sb.append(f2 ? "" : ",").append(str(e.getKey())).append(":[").append(info.offset()).append(",")
                      .append(info.timestamp()).append("]");
                    f2 = false;
                }
                sb.append("}");
            }
            sb.append("},\"groups\":{");
            first = true;
            List<String> groups = new ArrayList<>();
            for (var g : admin.listGroups().all().get()) {
                groups.add(g.groupId());
            }
            Collections.sort(groups);
            for (String g : groups) {
                Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata().get();
                sb.append(first ? "" : ",").append(str(g)).append(":{");
                first = false;
                boolean f2 = true;
                for (var e : new TreeMap<String, OffsetAndMetadata>(toStrings(offsets)).entrySet()) {
                    sb.append(f2 ? "" : ",").append(str(e.getKey())).append(":[").append(e.getValue().offset()).append(",")
                      .append(str(e.getValue().metadata())).append("]");
                    f2 = false;
                }
                sb.append("}");
            }
            sb.append("}}");
        }
        System.out.println(sb);
    }

    static Map<String, OffsetAndMetadata> toStrings(Map<TopicPartition, OffsetAndMetadata> m) {
        Map<String, OffsetAndMetadata> out = new HashMap<>();
        for (var e : m.entrySet()) {
            if (e.getValue() != null) {
                out.put(e.getKey().toString(), e.getValue());
            }
        }
        return out;
    }

    static Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> listOffsets(
            Admin admin, Collection<TopicPartition> tps, OffsetSpec spec, IsolationLevel level) throws Exception {
        Map<TopicPartition, OffsetSpec> req = new HashMap<>();
        for (TopicPartition tp : tps) {
            req.put(tp, spec);
        }
        return admin.listOffsets(req, new ListOffsetsOptions(level)).all().get();
    }

    // ---------------------------------------------------------------- JSON

    static String b64(byte[] b) {
        return b == null ? "null" : "\"" + Base64.getEncoder().encodeToString(b) + "\"";
    }

    static String str(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder sb = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            if (ch == '"' || ch == '\\') {
                sb.append('\\').append(ch);
            } else if (ch < 0x20) {
                sb.append(String.format("\\u%04x", (int) ch));
            } else {
                sb.append(ch);
            }
        }
        return sb.append('"').toString();
    }
}
