import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka's own admin client and producers against a multi-broker cluster, for tests/oracles/cluster_fixture.py.
 * Compiled together with BrokerClient.java (whose record generator, consumer and JSON helpers it uses).
 *
 * <pre>
 * ClusterClient repl BOOTSTRAP
 *     one long-lived Admin client; reads one command a line from stdin and answers each with one
 *     JSON line on stdout ({"error": "..."} when it failed):
 *       create TOPIC PARTITIONS RF [NAME=VALUE...]   a topic with RF replicas and those topic configs
 *       describe TOPIC...       per partition: leader, replicas, isr, elr, lastKnownElr (describeTopics)
 *                               and leaderEpoch (ListOffsets latest: Partition.fetchOffsetForTimestamp
 *                               answers LATEST with the partition's current leader epoch)
 *       offsets TOPIC...        per partition: earliest, latest (the high watermark: read_uncommitted),
 *                               lso (latest at read_committed) and leaderEpoch, or null where the
 *                               partition has no leader to answer
 *       elect TYPE TOPIC PARTITION   electLeaders PREFERRED | UNCLEAN; answers {"error": null} or the
 *                               error's class name (ElectionNotNeededException when the leader is already there)
 *       alter TOPIC NAME=VALUE...    incrementalAlterConfigs SET
 * ClusterClient groups BOOTSTRAP PREFIX SEED TOPIC...
 *     consumer groups of both protocols (and one through Admin) commit random offsets of TOPICS;
 *     prints every group's committed offsets as Admin lists them (see groups()).
 * ClusterClient consume BOOTSTRAP COMMITTED_OUT UNCOMMITTED_OUT TOPIC...
 *     BrokerClient consume at read_committed into COMMITTED_OUT and at read_uncommitted into
 *     UNCOMMITTED_OUT, the two consumers at once in one JVM.
 * ClusterClient produce BOOTSTRAP SEED PAUSE_MS TOPIC:KIND:RECORDS...
 *     one thread per TOPIC:KIND:RECORDS, KIND plain (acks=all, not idempotent) | idempotent | txn
 *     (transactions of 1-60 records, a third aborted, flushed first so that their records are in the
 *     log); each thread writes its records in five runs,
 *     one per codec (none, gzip, snappy, lz4, zstd), with BrokerClient.record's random keys, null
 *     values, headers and timestamps, pausing PAUSE_MS every 20 records (so that brokers can be
 *     killed meanwhile). A send, commit or abort that fails (a broker killed under it) is counted, not
 *     fatal: a failed transaction is aborted, or its producer replaced (initTransactions fences and
 *     aborts it). Prints one JSON line per spec: records acked, failed, transactions committed,
 *     aborted, failed.
 * </pre>
 */
public class ClusterClient {
    static final String[] CODECS = BrokerClient.CODECS;

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "repl":
                repl(args[1]);
                break;
            case "produce":
                List<String> specs = List.of(args).subList(4, args.length);
                produce(args[1], Long.parseLong(args[2]), Long.parseLong(args[3]), specs);
                break;
            case "consume":
                consumeBoth(args[1], args[2], args[3], List.of(args).subList(4, args.length));
                break;
            case "groups":
                groups(args[1], args[2], Long.parseLong(args[3]), List.of(args).subList(4, args.length));
                break;
            default:
                throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }

    /** BrokerClient.consume at both isolation levels at once, in two threads of one JVM. */
    static void consumeBoth(String bootstrap, String committedOut, String uncommittedOut, List<String> topics) throws Exception {
        inThreads(List.<Callable<String>>of(
                () -> { BrokerClient.consume(bootstrap, "read_committed", committedOut, topics); return ""; },
                () -> { BrokerClient.consume(bootstrap, "read_uncommitted", uncommittedOut, topics); return ""; }));
    }

    /**
     * Consumer groups that commit offsets of TOPICS, one at a time: PREFIX-classic-0 and -1 with the
     * classic protocol, PREFIX-consumer-0 and -1 with the consumer protocol (KIP-848), each subscribed
     * until it is assigned every partition, then committing a random offset in [log start, end] of each
     * (commitSync); PREFIX-simple through Admin.alterConsumerGroupOffsets (a group without members).
     * Then prints one JSON line: every group's committed offsets as Admin.listConsumerGroupOffsets
     * answers them, {"group": {"topic-p": offset}}.
     */
    static void groups(String bootstrap, String prefix, long seed, List<String> topics) throws Exception {
        Random r = new Random(seed);
        List<String> names = new ArrayList<>();
        for (String protocol : new String[] {"classic", "consumer"}) {
            for (int i = 0; i < 2; i++) {
                String group = prefix + "-" + protocol + "-" + i;
                names.add(group);
                Properties p = new Properties();
                p.put("bootstrap.servers", bootstrap);
                p.put("group.id", group);
                p.put("group.protocol", protocol);
                p.put("enable.auto.commit", "false");
                p.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
                p.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
                try (org.apache.kafka.clients.consumer.KafkaConsumer<byte[], byte[]> c =
                         new org.apache.kafka.clients.consumer.KafkaConsumer<>(p)) {
                    c.subscribe(topics);
                    Set<TopicPartition> want = new java.util.HashSet<>();
                    for (String t : topics) {
                        for (var info : c.partitionsFor(t)) {
                            want.add(new TopicPartition(t, info.partition()));
                        }
                    }
                    long deadline = System.currentTimeMillis() + 60_000;
                    while (!c.assignment().containsAll(want)) {
                        if (System.currentTimeMillis() > deadline) {
                            throw new IllegalStateException(group + " was not assigned " + want + " in 60 s: " + c.assignment());
                        }
                        c.poll(java.time.Duration.ofMillis(200));
                    }
                    Map<TopicPartition, Long> starts = c.beginningOffsets(want);
                    Map<TopicPartition, Long> ends = c.endOffsets(want);
                    Map<TopicPartition, org.apache.kafka.clients.consumer.OffsetAndMetadata> commit = new HashMap<>();
                    for (TopicPartition tp : want) {
                        long lo = starts.get(tp), hi = ends.get(tp);
                        commit.put(tp, new org.apache.kafka.clients.consumer.OffsetAndMetadata(
                            lo + (long) (r.nextDouble() * (hi - lo + 1)), "m" + r.nextInt(100)));
                    }
                    c.commitSync(commit);
                }
            }
        }
        String simple = prefix + "-simple";
        names.add(simple);
        try (Admin admin = admin(bootstrap)) {
            Map<TopicPartition, org.apache.kafka.clients.consumer.OffsetAndMetadata> commit = new HashMap<>();
            for (String t : topics) {
                var tps = admin.describeTopics(List.of(t)).allTopicNames().get().get(t).partitions();
                for (TopicPartitionInfo info : tps) {
                    commit.put(new TopicPartition(t, info.partition()),
                               new org.apache.kafka.clients.consumer.OffsetAndMetadata(r.nextInt(50)));
                }
            }
            admin.alterConsumerGroupOffsets(simple, commit).all().get();
            StringBuilder sb = new StringBuilder("{");
            boolean first = true;
            for (String g : names) {
                var offsets = admin.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata().get();
                sb.append(first ? "" : ",").append(BrokerClient.str(g)).append(":{");
                first = false;
                boolean f2 = true;
                for (var e : new TreeMap<String, org.apache.kafka.clients.consumer.OffsetAndMetadata>(
                         BrokerClient.toStrings(offsets)).entrySet()) {
                    sb.append(f2 ? "" : ",").append(BrokerClient.str(e.getKey())).append(":").append(e.getValue().offset());
                    f2 = false;
                }
                sb.append("}");
            }
            System.out.println(sb.append("}"));
        }
    }

    /** Each job in a thread of its own, all at once; their results in order, or the first failure. */
    static List<String> inThreads(List<Callable<String>> jobs) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(jobs.size());
        try {
            List<String> out = new ArrayList<>();
            for (Future<String> f : pool.invokeAll(jobs)) {
                out.add(f.get());
            }
            return out;
        } finally {
            pool.shutdownNow();
        }
    }

    // ---------------------------------------------------------------- admin

    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        p.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        return Admin.create(p);
    }

    static void repl(String bootstrap) throws Exception {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        try (Admin admin = admin(bootstrap);
             BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            out.println("{\"ready\":true}");
            String line;
            while ((line = in.readLine()) != null) {
                String[] a = line.trim().split(" ");
                String answer;
                try {
                    answer = command(admin, a);
                } catch (Exception e) {
                    Throwable c = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
                    answer = "{\"error\":" + BrokerClient.str(c.getClass().getSimpleName() + ": " + c.getMessage()) + "}";
                }
                out.println(answer);
            }
        }
    }

    static String command(Admin admin, String[] a) throws Exception {
        List<String> rest = List.of(a).subList(1, a.length);
        switch (a[0]) {
            case "create": {
                NewTopic t = new NewTopic(a[1], Integer.parseInt(a[2]), Short.parseShort(a[3]))
                        .configs(BrokerClient.configArgs(a, 4));
                admin.createTopics(List.of(t)).all().get();
                return "{\"ok\":true}";
            }
            case "describe":
                return describe(admin, rest);
            case "offsets":
                return offsets(admin, rest);
            case "elect": {
                TopicPartition tp = new TopicPartition(a[2], Integer.parseInt(a[3]));
                Map<TopicPartition, Optional<Throwable>> r =
                        admin.electLeaders(ElectionType.valueOf(a[1]), Set.of(tp)).partitions().get();
                Optional<Throwable> err = r.get(tp);
                return "{\"error\":" + (err == null || err.isEmpty() ? "null" : BrokerClient.str(err.get().getClass().getSimpleName())) + "}";
            }
            case "alter": {
                List<AlterConfigOp> ops = new ArrayList<>();
                for (Map.Entry<String, String> e : BrokerClient.configArgs(a, 2).entrySet()) {
                    ops.add(new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue()), AlterConfigOp.OpType.SET));
                }
                admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.TOPIC, a[1]), ops)).all().get();
                return "{\"ok\":true}";
            }
            default:
                throw new IllegalArgumentException("unknown command " + a[0]);
        }
    }

    static String ids(List<Node> nodes) {
        StringBuilder sb = new StringBuilder("[");
        for (Node n : nodes) {
            sb.append(sb.length() > 1 ? "," : "").append(n.id());
        }
        return sb.append("]").toString();
    }

    static Map<String, TopicPartition> partitions(Map<String, TopicDescription> desc, List<String> topics) {
        Map<String, TopicPartition> tps = new TreeMap<>();
        for (String t : topics) {
            for (TopicPartitionInfo info : desc.get(t).partitions()) {
                tps.put(t + "-" + info.partition(), new TopicPartition(t, info.partition()));
            }
        }
        return tps;
    }

    /** The partitions describeTopics gave a leader: the only ones ListOffsets is asked about. */
    static List<TopicPartition> led(Map<String, TopicDescription> desc) {
        List<TopicPartition> out = new ArrayList<>();
        for (TopicDescription d : desc.values()) {
            for (TopicPartitionInfo info : d.partitions()) {
                if (info.leader() != null && !info.leader().isEmpty()) {
                    out.add(new TopicPartition(d.name(), info.partition()));
                }
            }
        }
        return out;
    }

    /**
     * ListOffsets for each partition on its own: a partition without a leader (not asked, or one
     * that lost it meanwhile) answers null, not the whole call.
     */
    static Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> listOffsets(
            Admin admin, Iterable<TopicPartition> tps, OffsetSpec spec, IsolationLevel level) {
        Map<TopicPartition, OffsetSpec> req = new HashMap<>();
        for (TopicPartition tp : tps) {
            req.put(tp, spec);
        }
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> out = new HashMap<>();
        if (req.isEmpty()) {
            return out;
        }
        ListOffsetsResult result = admin.listOffsets(req, new ListOffsetsOptions(level).timeoutMs(8000));
        for (TopicPartition tp : req.keySet()) {
            KafkaFuture<ListOffsetsResult.ListOffsetsResultInfo> f = result.partitionResult(tp);
            try {
                out.put(tp, f.get(10, TimeUnit.SECONDS));
            } catch (Exception e) {
                out.put(tp, null);
            }
        }
        return out;
    }

    static String epoch(ListOffsetsResult.ListOffsetsResultInfo info) {
        return info == null || info.leaderEpoch().isEmpty() ? "null" : Integer.toString(info.leaderEpoch().get());
    }

    static String offset(ListOffsetsResult.ListOffsetsResultInfo info) {
        return info == null ? "null" : Long.toString(info.offset());
    }

    static String describe(Admin admin, List<String> topics) throws Exception {
        Map<String, TopicDescription> desc = admin.describeTopics(topics).allTopicNames().get();
        var latest = listOffsets(admin, led(desc), OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED);
        StringBuilder sb = new StringBuilder("{");
        for (String t : topics) {
            for (TopicPartitionInfo info : desc.get(t).partitions()) {
                TopicPartition tp = new TopicPartition(t, info.partition());
                sb.append(sb.length() > 1 ? "," : "").append(BrokerClient.str(tp.toString())).append(":{\"leader\":")
                  .append(info.leader() == null ? -1 : info.leader().id())
                  .append(",\"leaderEpoch\":").append(epoch(latest.get(tp)))
                  .append(",\"replicas\":").append(ids(info.replicas()))
                  .append(",\"isr\":").append(ids(info.isr()))
                  .append(",\"elr\":").append(ids(info.elr() == null ? List.of() : info.elr()))
                  .append(",\"lastKnownElr\":").append(ids(info.lastKnownElr() == null ? List.of() : info.lastKnownElr()))
                  .append(",\"topicId\":").append(BrokerClient.str(desc.get(t).topicId().toString())).append("}");
            }
        }
        return sb.append("}").toString();
    }

    static String offsets(Admin admin, List<String> topics) throws Exception {
        Map<String, TopicDescription> desc = admin.describeTopics(topics).allTopicNames().get();
        Map<String, TopicPartition> tps = partitions(desc, topics);
        List<TopicPartition> led = led(desc);
        var earliest = listOffsets(admin, led, OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED);
        var latest = listOffsets(admin, led, OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED);
        var lso = listOffsets(admin, led, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED);
        StringBuilder sb = new StringBuilder("{");
        for (Map.Entry<String, TopicPartition> e : tps.entrySet()) {
            TopicPartition tp = e.getValue();
            sb.append(sb.length() > 1 ? "," : "").append(BrokerClient.str(e.getKey()))
              .append(":{\"earliest\":").append(offset(earliest.get(tp)))
              .append(",\"latest\":").append(offset(latest.get(tp)))
              .append(",\"lso\":").append(offset(lso.get(tp)))
              .append(",\"leaderEpoch\":").append(epoch(latest.get(tp))).append("}");
        }
        return sb.append("}").toString();
    }

    // ---------------------------------------------------------------- produce

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, String kind, String codec, Random r, String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.LINGER_MS_CONFIG, Integer.toString(r.nextInt(5)));
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, Integer.toString(1024 << r.nextInt(5)));
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, Boolean.toString(!kind.equals("plain")));
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        if (txnId != null) {
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
            p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        }
        return new KafkaProducer<>(p);
    }

    static void produce(String bootstrap, long seed, long pauseMs, List<String> specs) throws Exception {
        List<Callable<String>> jobs = new ArrayList<>();
        for (int i = 0; i < specs.size(); i++) {
            String[] s = specs.get(i).split(":");
            long threadSeed = seed * 31 + i;
            jobs.add(() -> produceOne(bootstrap, new Random(threadSeed), pauseMs, s[0], s[1], Integer.parseInt(s[2])));
        }
        for (String r : inThreads(jobs)) {
            System.out.println(r);
        }
    }

    static String produceOne(String bootstrap, Random r, long pauseMs, String topic, String kind, int records) throws Exception {
        int partitions;
        try (Admin admin = admin(bootstrap)) {
            partitions = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
        }
        AtomicLong acked = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        long committed = 0;
        long aborted = 0;
        long failedTxns = 0;
        boolean txn = kind.equals("txn");
        String txnId = txn ? topic + "-tx-" + r.nextInt(1_000_000) : null;
        int start = r.nextInt(CODECS.length);
        int written = 0;
        for (int c = 0; c < CODECS.length; c++) {
            int quota = records * (c + 1) / CODECS.length - written;
            KafkaProducer<byte[], byte[]> p = producer(bootstrap, kind, CODECS[(start + c) % CODECS.length], r, txnId);
            if (txn) {
                p.initTransactions();
            }
            try {
                int n = 0;
                while (n < quota) {
                    int k = txn ? Math.min(quota - n, 1 + r.nextInt(60)) : quota - n;
                    if (txn) {
                        p.beginTransaction();
                    }
                    boolean ok = true;
                    long[] sent = {0};
                    for (int i = 0; i < k; i++, n++) {
                        try {
                            p.send(BrokerClient.record(r, topic, partitions, false, 0), (md, e) -> {
                                if (e == null) {
                                    acked.incrementAndGet();
                                } else {
                                    failed.incrementAndGet();
                                }
                            });
                            sent[0]++;
                        } catch (Exception e) {
                            failed.incrementAndGet();
                            ok = false;
                            break;
                        }
                        if (n % 20 == 19 && pauseMs > 0) {
                            Thread.sleep(pauseMs);
                        }
                    }
                    if (!txn) {
                        continue;
                    }
                    boolean abort = !ok || r.nextInt(3) == 0;
                    try {
                        if (abort) {
                            p.flush();  // the aborted records reach the log: read_uncommitted sees them
                            p.abortTransaction();
                            aborted++;
                        } else {
                            p.commitTransaction();
                            committed++;
                        }
                    } catch (Exception e) {
                        failedTxns++;
                        try {
                            p.abortTransaction();
                        } catch (Exception e2) {
                            // the producer is in a fatal state: a new one (initTransactions fences the old)
                            p.close(java.time.Duration.ofSeconds(5));
                            p = producer(bootstrap, kind, CODECS[(start + c) % CODECS.length], r, txnId);
                            p.initTransactions();
                        }
                    }
                }
                p.flush();
            } finally {
                p.close(java.time.Duration.ofSeconds(30));
            }
            written += quota;
        }
        return "{\"topic\":" + BrokerClient.str(topic) + ",\"kind\":" + BrokerClient.str(kind) + ",\"records\":" + records
                + ",\"acked\":" + acked.get() + ",\"failed\":" + failed.get() + ",\"committed\":" + committed
                + ",\"aborted\":" + aborted + ",\"failedTxns\":" + failedTxns + "}";
    }
}
