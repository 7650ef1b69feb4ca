// Test oracle: Confluent's own Avro serde (kafka-avro-serializer 7.0.16) over a MockSchemaRegistryClient
// loaded with the schemas klog's tests hand it. One request per stdin line, fields separated by spaces,
// text fields base64 (UTF-8):
//   REG <subject> <version> <id> <schemaType> <b64 schema> <b64 references JSON>  -> "OK"
//   DES <topic> <isKey> <readerId|-> <b64 bytes>   KafkaAvroDeserializer.deserialize (resolved to the
//        reader schema if an id is given) -> "OK <value as JSON, in the form spark-avro gives it>"
//   SER <topic> <isKey> <b64 schema> <b64 Avro-JSON datum>   KafkaAvroSerializer (auto-registering)
//        -> "OK <b64 bytes> <id> <version> <b64 registered schema text>"
// or "ERR <exception>: <message>". The JSON form: records as objects of every field, enums and strings
// as strings, bytes/fixed base64, decimals as plain strings, timestamps as epoch microseconds, dates as
// epoch days, [null, x] as x, unions of several types as {"member0": .., "member1": ..} (spark-avro's struct).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.confluent.kafka.schemaregistry.ParsedSchema;
import io.confluent.kafka.schemaregistry.avro.AvroSchema;
import io.confluent.kafka.schemaregistry.client.MockSchemaRegistryClient;
import io.confluent.kafka.schemaregistry.client.rest.entities.SchemaReference;
import io.confluent.kafka.serializers.KafkaAvroDeserializer;
import io.confluent.kafka.serializers.KafkaAvroSerializer;
import org.apache.avro.LogicalType;
import org.apache.avro.LogicalTypes;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericFixed;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.DecoderFactory;

public class ConfluentAvro {
    static final ObjectMapper JSON = new ObjectMapper();

    static String b64(String s) {
        return new String(Base64.getDecoder().decode(s), StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        MockSchemaRegistryClient client = new MockSchemaRegistryClient();
        Map<String, Object> conf = new HashMap<>();
        conf.put("schema.registry.url", "mock://klog");
        conf.put("auto.register.schemas", true);
        KafkaAvroDeserializer keyDes = new KafkaAvroDeserializer(client);
        keyDes.configure(conf, true);
        KafkaAvroDeserializer valueDes = new KafkaAvroDeserializer(client);
        valueDes.configure(conf, false);
        KafkaAvroSerializer keySer = new KafkaAvroSerializer(client);
        keySer.configure(conf, true);
        KafkaAvroSerializer valueSer = new KafkaAvroSerializer(client);
        valueSer.configure(conf, false);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] p = line.split(" ", -1);
            try {
                if (p[0].equals("REG")) {
                    List<SchemaReference> refs = new ArrayList<>();
                    for (JsonNode r : JSON.readTree(b64(p[6]))) {
                        refs.add(new SchemaReference(r.get("name").asText(), r.get("subject").asText(),
                            r.get("version").asInt()));
                    }
                    ParsedSchema s = client.parseSchema(p[4], b64(p[5]), refs)
                        .orElseThrow(() -> new IllegalArgumentException("schema does not parse"));
                    client.register(p[1], s, Integer.parseInt(p[2]), Integer.parseInt(p[3]));
                    System.out.println("OK");
                } else if (p[0].equals("DES")) {
                    boolean isKey = Boolean.parseBoolean(p[2]);
                    KafkaAvroDeserializer des = isKey ? keyDes : valueDes;
                    byte[] bytes = Base64.getDecoder().decode(p[4]);
                    Schema reader = null;
                    if (!p[3].equals("-")) {
                        reader = ((AvroSchema) client.getSchemaById(Integer.parseInt(p[3]))).rawSchema();
                    }
                    Object v = reader == null ? des.deserialize(p[1], bytes) : des.deserialize(p[1], bytes, reader);
                    Schema schema = reader != null ? reader
                        : ((AvroSchema) client.getSchemaById(ByteBuffer.wrap(bytes, 1, 4).getInt())).rawSchema();
                    StringBuilder sb = new StringBuilder();
                    write(sb, v, schema);
                    System.out.println("OK " + sb);
                } else if (p[0].equals("SER")) {
                    boolean isKey = Boolean.parseBoolean(p[2]);
                    Schema schema = new Schema.Parser().parse(b64(p[3]));
                    Object datum = new GenericDatumReader<Object>(schema)
                        .read(null, DecoderFactory.get().jsonDecoder(schema, b64(p[4])));
                    byte[] bytes = (isKey ? keySer : valueSer).serialize(p[1], datum);
                    int id = ByteBuffer.wrap(bytes, 1, 4).getInt();
                    String subject = p[1] + (isKey ? "-key" : "-value");
                    AvroSchema registered = (AvroSchema) client.getSchemaById(id);
                    int version = client.getVersion(subject, registered);
                    System.out.println("OK " + Base64.getEncoder().encodeToString(bytes) + " " + id + " " + version
                        + " " + Base64.getEncoder().encodeToString(
                            registered.canonicalString().getBytes(StandardCharsets.UTF_8)));
                } else {
                    System.out.println("ERR IllegalArgumentException: unknown request " + p[0]);
                }
            } catch (Throwable e) {
                Throwable t = e;
                StringBuilder msg = new StringBuilder(t.getClass().getSimpleName() + ": " + t.getMessage());
                while (t.getCause() != null && t.getCause() != t) {
                    t = t.getCause();
                    msg.append(" / ").append(t.getClass().getSimpleName()).append(": ").append(t.getMessage());
                }
                System.out.println("ERR " + msg.toString().replace('\n', ' '));
            }
            System.out.flush();
        }
    }

    static void str(StringBuilder sb, String s) throws Exception {
        sb.append(JSON.writeValueAsString(s));
    }

    static void write(StringBuilder sb, Object v, Schema s) throws Exception {
        if (v == null) {
            sb.append("null");
            return;
        }
        LogicalType lt = s.getLogicalType();
        switch (s.getType()) {
            case UNION: {
                List<Schema> others = new ArrayList<>();
                for (Schema b : s.getTypes()) {
                    if (b.getType() != Schema.Type.NULL) others.add(b);
                }
                int i = GenericData.get().resolveUnion(s, v);
                Schema branch = s.getTypes().get(i);
                if (others.size() == 1) {
                    write(sb, v, branch);
                    return;
                }
                java.util.Set<Schema.Type> kinds = new java.util.HashSet<>();
                for (Schema b : others) kinds.add(b.getType());
                if (others.size() == 2 && (kinds.equals(java.util.Set.of(Schema.Type.INT, Schema.Type.LONG))
                        || kinds.equals(java.util.Set.of(Schema.Type.FLOAT, Schema.Type.DOUBLE)))) {
                    write(sb, v, branch);
                    return;
                }
                int member = others.indexOf(branch);
                sb.append('{');
                for (int j = 0; j < others.size(); j++) {
                    if (j > 0) sb.append(',');
                    str(sb, "member" + j);
                    sb.append(':');
                    if (j == member) write(sb, v, branch); else sb.append("null");
                }
                sb.append('}');
                return;
            }
            case RECORD: {
                GenericRecord r = (GenericRecord) v;
                sb.append('{');
                boolean first = true;
                for (Schema.Field f : s.getFields()) {
                    if (!first) sb.append(',');
                    first = false;
                    str(sb, f.name());
                    sb.append(':');
                    write(sb, r.get(f.name()), f.schema());
                }
                sb.append('}');
                return;
            }
            case ARRAY: {
                sb.append('[');
                boolean first = true;
                for (Object x : (java.util.Collection<?>) v) {
                    if (!first) sb.append(',');
                    first = false;
                    write(sb, x, s.getElementType());
                }
                sb.append(']');
                return;
            }
            case MAP: {
                sb.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                    if (!first) sb.append(',');
                    first = false;
                    str(sb, e.getKey().toString());
                    sb.append(':');
                    write(sb, e.getValue(), s.getValueType());
                }
                sb.append('}');
                return;
            }
            case BYTES:
            case FIXED: {
                byte[] b;
                if (v instanceof ByteBuffer) {
                    ByteBuffer bb = ((ByteBuffer) v).duplicate();
                    b = new byte[bb.remaining()];
                    bb.get(b);
                } else {
                    b = ((GenericFixed) v).bytes();
                }
                if (lt instanceof LogicalTypes.Decimal) {
                    str(sb, new BigDecimal(new BigInteger(b), ((LogicalTypes.Decimal) lt).getScale()).toPlainString());
                } else {
                    str(sb, Base64.getEncoder().encodeToString(b));
                }
                return;
            }
            case LONG: {
                long x = ((Number) v).longValue();
                if (lt != null && (lt.getName().equals("timestamp-millis") || lt.getName().equals("local-timestamp-millis"))) {
                    x = x * 1000;
                }
                sb.append(x);
                return;
            }
            case INT:
                sb.append(((Number) v).intValue());
                return;
            case FLOAT:
            case DOUBLE: {
                double d = ((Number) v).doubleValue();
                if (Double.isNaN(d) || Double.isInfinite(d)) str(sb, Double.toString(d));
                else sb.append(JSON.writeValueAsString(s.getType() == Schema.Type.FLOAT ? (double) (Float) v : d));
                return;
            }
            case BOOLEAN:
                sb.append(v.toString());
                return;
            case ENUM:
            case STRING:
                str(sb, v.toString());
                return;
            default:
                throw new IllegalStateException("unexpected Avro type " + s.getType());
        }
    }
}
