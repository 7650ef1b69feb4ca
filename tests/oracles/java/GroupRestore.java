// Test oracle for klog's restore of consumer groups (tests/tools/test_restore_groups.py), compiled against the
// broker's jars (tests/oracles/broker_fixture.py). Strings travel as hex of their UTF-16BE code units ("-": null).
//   java GroupRestore hash <partitions>...   stdin: one group id a line; prints, for each count,
//                                            Utils.abs(groupId.hashCode()) % partitions, as
//                                            GroupCoordinatorService.partitionFor computes it
//   java GroupRestore records                stdin: one record a line, "offset <group> <topic> <partition>
//                                            <offset> <metadata> <commitTimestamp> <topicId or ->",
//                                            "classic <group> <protocolType> <currentStateTimestamp>" or
//                                            "consumer <group> <epoch>"; prints, one line per record,
//                                            the hex of the key and value Kafka's group coordinator
//                                            writes for it (GroupCoordinatorRecordHelpers, serialized by
//                                            GroupCoordinatorRecordSerde)
//   java GroupRestore decode                 stdin: "<key hex> <value hex>" a line; Kafka's serde reads the
//                                            record and writes it again: prints the hex of that, and the
//                                            record's toString
//   java GroupRestore offsets <bootstrap> <group>...
//                                            Admin.listConsumerGroupOffsets and describeConsumerGroups: one
//                                            JSON line a group, {"group", "type", "offsets": {"t-p": o}}
//   java GroupRestore resume <bootstrap> <group> <classic|consumer> <topic>
//                                            a consumer of the group (group.protocol as given,
//                                            auto.offset.reset=none, no commits) subscribes to the topic;
//                                            prints {"positions": {"t-p": o}, "first": {"t-p": offset of
//                                            the first record it got}, "firstValue": {"t-p": its value,
//                                            hex}} once it has every partition's position and a record
//                                            of each partition not at its end
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordHelpers;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import org.apache.kafka.coordinator.group.generated.GroupMetadataKey;
import org.apache.kafka.coordinator.group.generated.GroupMetadataValue;
import org.apache.kafka.server.common.ApiMessageAndVersion;

public class GroupRestore {
    static final GroupCoordinatorRecordSerde SERDE = new GroupCoordinatorRecordSerde();

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "hash":
                for (String line : lines()) {
                    StringBuilder sb = new StringBuilder();
                    for (int i = 1; i < args.length; i++) {
                        sb.append(i > 1 ? " " : "").append(Utils.abs(text(line).hashCode()) % Integer.parseInt(args[i]));
                    }
                    System.out.println(sb);
                }
                break;
            case "records":
                for (String line : lines()) {
                    for (CoordinatorRecord r : records(line.split(" "))) {
                        System.out.println(hex(SERDE.serializeKey(r)) + " " + hex(SERDE.serializeValue(r)));
                    }
                }
                break;
            case "decode":
                for (String line : lines()) {
                    String[] kv = line.split(" ");
                    CoordinatorRecord r = SERDE.deserialize(ByteBuffer.wrap(unhex(kv[0])), ByteBuffer.wrap(unhex(kv[1])));
                    System.out.println(hex(SERDE.serializeKey(r)) + " " + hex(SERDE.serializeValue(r)) + " " + r);
                }
                break;
            case "offsets":
                offsets(args[1], List.of(args).subList(2, args.length));
                break;
            case "resume":
                resume(args[1], args[2], args[3], args[4]);
                break;
            default:
                throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }

    static List<CoordinatorRecord> records(String[] f) {
        switch (f[0]) {
            case "offset": {
                Uuid topicId = f[7].equals("-") ? Uuid.ZERO_UUID : Uuid.fromString(f[7]);
                org.apache.kafka.coordinator.group.OffsetAndMetadata om = new org.apache.kafka.coordinator.group.OffsetAndMetadata(
                    Long.parseLong(f[4]), OptionalInt.empty(), text(f[5]), Long.parseLong(f[6]), OptionalLong.empty(), topicId);
                return List.of(GroupCoordinatorRecordHelpers.newOffsetCommitRecord(text(f[1]), text(f[2]), Integer.parseInt(f[3]), om));
            }
            case "classic":
                // GroupCoordinatorRecordHelpers.newGroupMetadataRecord of an Empty group (it takes a
                // ClassicGroup; the value it builds, at GROUP_METADATA_VALUE_VERSION 3)
                return List.of(CoordinatorRecord.record(
                    new GroupMetadataKey().setGroup(text(f[1])),
                    new ApiMessageAndVersion(new GroupMetadataValue()
                        .setProtocol(null)
                        .setProtocolType(text(f[2]))
                        .setGeneration(0)
                        .setLeader(null)
                        .setCurrentStateTimestamp(Long.parseLong(f[3]))
                        .setMembers(Collections.emptyList()), (short) 3)));
            case "consumer": {
                int epoch = Integer.parseInt(f[2]);
                return List.of(GroupCoordinatorRecordHelpers.newConsumerGroupEpochRecord(text(f[1]), epoch, 0L),
                    GroupCoordinatorRecordHelpers.newConsumerGroupTargetAssignmentMetadataRecord(text(f[1]), epoch, 0L));
            }
            default:
                throw new IllegalArgumentException("unknown record kind " + f[0]);
        }
    }

    static void offsets(String bootstrap, List<String> groups) throws Exception {
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            for (String g : groups) {
                Map<TopicPartition, OffsetAndMetadata> got =
                    admin.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata().get();
                String type;
                try {
                    ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(g)).all().get().get(g);
                    type = d.type().toString();
                } catch (java.util.concurrent.ExecutionException e) {
                    type = "none: " + e.getCause().getClass().getSimpleName();  // GroupIdNotFoundException
                }
                StringBuilder sb = new StringBuilder("{\"group\": \"" + g + "\", \"type\": \"" + type
                    + "\", \"offsets\": {");
                String sep = "";
                for (Map.Entry<String, OffsetAndMetadata> e : toNames(got).entrySet()) {
                    sb.append(sep).append("\"").append(e.getKey()).append("\": ").append(e.getValue().offset());
                    sep = ", ";
                }
                System.out.println(sb.append("}}"));
            }
        }
    }

    static Map<String, OffsetAndMetadata> toNames(Map<TopicPartition, OffsetAndMetadata> m) {
        Map<String, OffsetAndMetadata> out = new TreeMap<>();
        m.forEach((tp, om) -> { if (om != null) out.put(tp.toString(), om); });
        return out;
    }

    static void resume(String bootstrap, String group, String protocol, String topic) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(topic));
            Map<String, Long> positions = new TreeMap<>();
            Map<String, Long> first = new TreeMap<>();
            Map<String, String> firstValue = new TreeMap<>();
            long deadline = System.currentTimeMillis() + 60_000;
            int partitions = c.partitionsFor(topic).size();
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    if (first.putIfAbsent(r.topic() + "-" + r.partition(), r.offset()) == null) {
                        firstValue.put(r.topic() + "-" + r.partition(), r.value() == null ? "-" : hex(r.value()));
                    }
                }
                Set<TopicPartition> assigned = c.assignment();
                if (assigned.size() < partitions) continue;
                if (positions.isEmpty()) {
                    // where the group resumed: the position before any record of this run was consumed
                    Map<TopicPartition, OffsetAndMetadata> committed = c.committed(assigned);
                    for (TopicPartition tp : assigned) {
                        OffsetAndMetadata om = committed.get(tp);
                        positions.put(tp.toString(), om == null ? -1L : om.offset());
                    }
                }
                Map<TopicPartition, Long> ends = c.endOffsets(assigned);
                boolean done = true;
                for (TopicPartition tp : assigned) {
                    if (positions.get(tp.toString()) < ends.get(tp) && !first.containsKey(tp.toString())) done = false;
                }
                if (done) break;
            }
            System.out.println("{\"positions\": " + json(positions) + ", \"first\": " + json(first)
                + ", \"firstValue\": " + jsonText(firstValue) + "}");
        }
    }

    static String json(Map<String, Long> m) {
        StringBuilder sb = new StringBuilder("{");
        String sep = "";
        for (Map.Entry<String, Long> e : m.entrySet()) {
            sb.append(sep).append("\"").append(e.getKey()).append("\": ").append(e.getValue());
            sep = ", ";
        }
        return sb.append("}").toString();
    }

    static String jsonText(Map<String, String> m) {
        StringBuilder sb = new StringBuilder("{");
        String sep = "";
        for (Map.Entry<String, String> e : m.entrySet()) {
            sb.append(sep).append("\"").append(e.getKey()).append("\": \"").append(e.getValue()).append("\"");
            sep = ", ";
        }
        return sb.append("}").toString();
    }

    static List<String> lines() throws Exception {
        List<String> out = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        for (String line; (line = in.readLine()) != null; ) if (!line.isEmpty()) out.add(line);
        return out;
    }

    static String text(String hex) {
        return hex.equals("-") ? null : new String(unhex(hex), StandardCharsets.UTF_16BE);
    }

    static byte[] unhex(String s) {
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return out;
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) sb.append(String.format("%02x", x));
        return sb.toString();
    }
}
