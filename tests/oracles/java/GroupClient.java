// Test oracle: Kafka's own clients make every kind of group and transaction a broker records in its
// internal topics, for the decoders' tests (tests/tools/test_dump_groups.py). One run:
//   java GroupClient <bootstrap> <prefix> <seed>
// 1. enables the share and streams group features at the highest level the broker supports
//    (Admin.updateFeatures: share.version, streams.version), where it knows them;
// 2. a topic <prefix>-in of 2 partitions, records from a transactional producer (one transaction
//    committed, one aborted) and an idempotent one;
// 3. groups that commit offsets: classic and consumer protocol (KIP-848), a consumer group with a
//    regular-expression subscription the broker evaluates (SubscriptionPattern);
// 4. a share group (KIP-932): a KafkaShareConsumer that accepts, releases and rejects records and
//    commits its acknowledgements;
// 5. a streams group (KIP-1071): a Kafka Streams app (group.protocol=streams) that counts <prefix>-in
//    by key into <prefix>-out, run until it has committed.
// Prints one line per step: "OK <step>", or "SKIP streams <why>" where the broker offers no
// streams.version (4.1 only with unstable.feature.versions.enable). Any failure exits non-zero.
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.SupportedVersionRange;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;

public class GroupClient {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        Random r = new Random(Long.parseLong(args[2]));
        String in = prefix + "-in";
        String out = prefix + "-out";
        java.util.Set<String> enabled = new java.util.HashSet<>();
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            for (String feature : new String[] {"share.version", "streams.version"}) {
                FeatureMetadata fm = admin.describeFeatures().featureMetadata().get();
                SupportedVersionRange range = fm.supportedFeatures().get(feature);
                if (range == null || range.maxVersion() < 1) {
                    System.out.println("SKIP feature " + feature + " not supported");
                    continue;
                }
                admin.updateFeatures(Map.of(feature, new FeatureUpdate(range.maxVersion(), FeatureUpdate.UpgradeType.UPGRADE)),
                        new UpdateFeaturesOptions()).all().get();
                enabled.add(feature);
                System.out.println("OK feature " + feature + "=" + range.maxVersion());
            }
            admin.createTopics(List.of(new NewTopic(in, 2, (short) 1), new NewTopic(out, 1, (short) 1))).all().get();
        }
        produce(bootstrap, in, r, prefix);
        System.out.println("OK produce");
        for (String protocol : new String[] {"classic", "consumer"}) {
            consume(bootstrap, in, prefix + "-" + protocol, protocol, false);
            System.out.println("OK group " + protocol);
        }
        consume(bootstrap, in, prefix + "-regex", "consumer", true);
        System.out.println("OK group regex");
        share(bootstrap, in, prefix + "-share", r);
        System.out.println("OK share");
        if (!enabled.contains("streams.version")) {
            System.out.println("SKIP streams the broker has no streams.version");
            return;
        }
        streams(bootstrap, in, out, prefix + "-streams");
        System.out.println("OK streams");
    }

    static void produce(String bootstrap, String topic, Random r, String prefix) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, prefix + "-txn");
        try (KafkaProducer<String, String> txn = new KafkaProducer<>(p)) {
            txn.initTransactions();
            for (boolean commit : new boolean[] {true, false, true}) {
                txn.beginTransaction();
                for (int i = 0; i < 20; i++) {
                    txn.send(new ProducerRecord<>(topic, "k" + r.nextInt(5), "t" + i));
                }
                if (commit) txn.commitTransaction(); else txn.abortTransaction();
            }
        }
        p.remove(ProducerConfig.TRANSACTIONAL_ID_CONFIG);
        try (KafkaProducer<String, String> plain = new KafkaProducer<>(p)) {
            for (int i = 0; i < 60; i++) {
                plain.send(new ProducerRecord<>(topic, "k" + r.nextInt(5), "v" + i));
            }
        }
    }

    static Properties consumerProps(String bootstrap, String group) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return p;
    }

    static void consume(String bootstrap, String topic, String group, String protocol, boolean regex) {
        Properties p = consumerProps(bootstrap, group);
        p.put("group.protocol", protocol);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            if (regex) {
                // evaluated by the broker (KIP-848), which records it: the topic's name is letters,
                // digits and '-', literal in a regular expression
                c.subscribe(new SubscriptionPattern(topic));
            } else {
                c.subscribe(List.of(topic));
            }
            int seen = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while (seen < 100 && System.currentTimeMillis() < deadline) {
                seen += c.poll(Duration.ofMillis(200)).count();
            }
            c.commitSync();
        }
    }

    static void share(String bootstrap, String topic, String group, Random r) throws Exception {
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            // a share group starts at the latest offset unless told otherwise
            admin.incrementalAlterConfigs(Map.of(
                    new org.apache.kafka.common.config.ConfigResource(
                            org.apache.kafka.common.config.ConfigResource.Type.GROUP, group),
                    List.of(new org.apache.kafka.clients.admin.AlterConfigOp(
                            new org.apache.kafka.clients.admin.ConfigEntry("share.auto.offset.reset", "earliest"),
                            org.apache.kafka.clients.admin.AlterConfigOp.OpType.SET)))).all().get();
        }
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put("share.acknowledgement.mode", "explicit");
        try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p)) {
            c.subscribe(List.of(topic));
            int seen = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while (seen < 60 && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> rec : recs) {
                    int d = r.nextInt(10);
                    c.acknowledge(rec, d < 7 ? AcknowledgeType.ACCEPT : d < 9 ? AcknowledgeType.RELEASE : AcknowledgeType.REJECT);
                    seen++;
                }
                c.commitSync();
            }
            if (seen == 0) throw new IllegalStateException("the share consumer got no records in 60 s");
        }
    }

    static void streams(String bootstrap, String in, String out, String app) throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.STATE_DIR_CONFIG, System.getProperty("java.io.tmpdir") + "/" + app + "-state");
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        p.put("group.protocol", "streams");
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        StreamsBuilder b = new StreamsBuilder();
        b.stream(in, Consumed.with(Serdes.String(), Serdes.String()))
            .groupByKey().count().toStream().to(out, Produced.with(Serdes.String(), Serdes.Long()));
        Properties cp = consumerProps(bootstrap, app + "-reader");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        try (KafkaStreams streams = new KafkaStreams(b.build(), p);
             KafkaConsumer<String, byte[]> reader = new KafkaConsumer<>(cp)) {
            streams.start();
            reader.subscribe(List.of(out));
            int seen = 0;
            long deadline = System.currentTimeMillis() + 90_000;
            while (seen == 0 && System.currentTimeMillis() < deadline) {
                seen += reader.poll(Duration.ofMillis(200)).count();
            }
            if (seen == 0) throw new IllegalStateException("the streams app wrote nothing in 90 s: " + streams.state());
            Thread.sleep(1000);
            streams.close(Duration.ofSeconds(30));
        }
        TimeUnit.MILLISECONDS.sleep(100);
    }
}
