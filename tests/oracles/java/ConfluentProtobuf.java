// Test oracle: Confluent's own Protobuf serde (kafka-protobuf-serializer 7.0.16) over a
// MockSchemaRegistryClient. The serializer auto-registers each schema and the files it imports (as
// Confluent does: a reference per import, protobuf's well-known files left out), so the registry ends up
// holding the .proto text Confluent itself prints. One request per stdin line, fields separated by
// spaces, text fields base64 (UTF-8):
//   SER <topic> <isKey> <b64 files JSON {name: text}> <root file> <message full name> <b64 message JSON>
//        the message parsed by protobuf's JsonFormat, serialized by KafkaProtobufSerializer -> "OK <b64 bytes>"
//   DES <topic> <isKey> <b64 bytes>   KafkaProtobufDeserializer -> "OK <message full name> <b64 JsonFormat JSON>"
//   DUMP   every subject's versions -> "OK <b64 JSON [{subject, version, id, schemaType, schema, references}]>"
// or "ERR <exception>: <message>".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.Message;
import com.google.protobuf.util.JsonFormat;
import io.confluent.kafka.schemaregistry.client.MockSchemaRegistryClient;
import io.confluent.kafka.schemaregistry.client.SchemaMetadata;
import io.confluent.kafka.schemaregistry.client.rest.entities.SchemaReference;
import io.confluent.kafka.schemaregistry.protobuf.ProtobufSchema;
import io.confluent.kafka.serializers.protobuf.KafkaProtobufDeserializer;
import io.confluent.kafka.serializers.protobuf.KafkaProtobufSerializer;

public class ConfluentProtobuf {
    static final ObjectMapper JSON = new ObjectMapper();

    static String b64(String s) {
        return new String(Base64.getDecoder().decode(s), StandardCharsets.UTF_8);
    }

    static String enc(String s) {
        return Base64.getEncoder().encodeToString(s.getBytes(StandardCharsets.UTF_8));
    }

    public static void main(String[] args) throws Exception {
        MockSchemaRegistryClient client = new MockSchemaRegistryClient(
            List.of(new io.confluent.kafka.schemaregistry.protobuf.ProtobufSchemaProvider()));
        Map<String, Object> conf = new HashMap<>();
        conf.put("schema.registry.url", "mock://klog-protobuf");
        conf.put("auto.register.schemas", true);
        KafkaProtobufSerializer<Message> keySer = new KafkaProtobufSerializer<>(client);
        keySer.configure(conf, true);
        KafkaProtobufSerializer<Message> valueSer = new KafkaProtobufSerializer<>(client);
        valueSer.configure(conf, false);
        KafkaProtobufDeserializer<Message> keyDes = new KafkaProtobufDeserializer<>(client);
        keyDes.configure(conf, true);
        KafkaProtobufDeserializer<Message> valueDes = new KafkaProtobufDeserializer<>(client);
        valueDes.configure(conf, false);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] p = line.split(" ", -1);
            try {
                if (p[0].equals("SER")) {
                    boolean isKey = Boolean.parseBoolean(p[2]);
                    JsonNode files = JSON.readTree(b64(p[3]));
                    Map<String, String> deps = new HashMap<>();
                    for (Iterator<String> it = files.fieldNames(); it.hasNext(); ) {
                        String name = it.next();
                        if (!name.equals(p[4])) deps.put(name, files.get(name).asText());
                    }
                    ProtobufSchema schema = new ProtobufSchema(files.get(p[4]).asText(), new ArrayList<>(), deps,
                        null, p[4]);
                    Descriptor d = schema.toDescriptor(p[5]);
                    if (d == null) throw new IllegalArgumentException("no message " + p[5] + " in " + p[4]);
                    DynamicMessage.Builder b = DynamicMessage.newBuilder(d);
                    JsonFormat.parser().merge(b64(p[6]), b);
                    byte[] bytes = (isKey ? keySer : valueSer).serialize(p[1], b.build());
                    System.out.println("OK " + Base64.getEncoder().encodeToString(bytes));
                } else if (p[0].equals("DES")) {
                    boolean isKey = Boolean.parseBoolean(p[2]);
                    Message m = (isKey ? keyDes : valueDes).deserialize(p[1], Base64.getDecoder().decode(p[3]));
                    System.out.println("OK " + m.getDescriptorForType().getFullName() + " "
                        + enc(JsonFormat.printer().omittingInsignificantWhitespace().print(m)));
                } else if (p[0].equals("DUMP")) {
                    ArrayNode out = JSON.createArrayNode();
                    for (String subject : client.getAllSubjects()) {
                        for (Integer v : client.getAllVersions(subject)) {
                            SchemaMetadata md = client.getSchemaMetadata(subject, v);
                            ObjectNode o = out.addObject();
                            o.put("subject", subject);
                            o.put("version", md.getVersion());
                            o.put("id", md.getId());
                            o.put("schemaType", md.getSchemaType());
                            o.put("schema", md.getSchema());
                            ArrayNode refs = o.putArray("references");
                            for (SchemaReference r : md.getReferences()) {
                                ObjectNode ro = refs.addObject();
                                ro.put("name", r.getName());
                                ro.put("subject", r.getSubject());
                                ro.put("version", r.getVersion());
                            }
                        }
                    }
                    System.out.println("OK " + enc(JSON.writeValueAsString(out)));
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
}
