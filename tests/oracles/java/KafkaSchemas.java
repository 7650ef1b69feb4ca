// Test oracle: the schemas of the messages Kafka writes into its log dirs, as the release's own
// generated classes hold them (the message generator's output of the release's JSON definitions:
// each class's static SCHEMAS, one org.apache.kafka.common.protocol.types.Schema per version).
// One line per message class on stdout, a JSON object:
//   {"class": "RegisterBrokerRecord", "apiKey": 0, "lowest": 0, "highest": 4,
//    "versions": {"0": [field, ...], ...}}
// field: {"name": "broker_id", "tag": null, "type": type}; type: {"prim": "INT32", "nullable": false},
// {"array": type, "nullable": b} or {"struct": [field, ...], "nullable": b}. The tagged fields of a
// flexible version are the fields of its "_tagged_fields" entry, each with its tag. "defaults": the
// field values of a new instance of the class and of each nested struct class (the definitions'
// defaults: what a tagged field is when absent), by simple class name then Java field name; only
// primitives, uuids, strings and empty collections.
// Packages read: the coordinators' generated records, the KRaft metadata records, the remote log
// metadata records and the client messages klog reads in log dirs (consumer protocol, KRaft control).
import java.io.File;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;

import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.types.BoundField;
import org.apache.kafka.common.protocol.types.Schema;
import org.apache.kafka.common.protocol.types.TaggedFields;
import org.apache.kafka.common.protocol.types.Type;

public class KafkaSchemas {
    static final String[] PACKAGES = {
        "org/apache/kafka/coordinator/group/generated/",
        "org/apache/kafka/coordinator/transaction/generated/",
        "org/apache/kafka/coordinator/share/generated/",
        "org/apache/kafka/common/metadata/",
        "org/apache/kafka/server/log/remote/metadata/storage/generated/",
    };
    static final String[] CLIENT_MESSAGES = {
        "ConsumerProtocolSubscription", "ConsumerProtocolAssignment", "LeaderChangeMessage",
        "SnapshotHeaderRecord", "SnapshotFooterRecord", "KRaftVersionRecord", "VotersRecord",
    };

    public static void main(String[] args) throws Exception {
        TreeSet<String> classes = new TreeSet<>();
        for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
            if (!entry.endsWith(".jar")) continue;
            try (JarFile jar = new JarFile(entry)) {
                for (Enumeration<JarEntry> e = jar.entries(); e.hasMoreElements(); ) {
                    String n = e.nextElement().getName();
                    if (!n.endsWith(".class") || n.contains("$")) continue;
                    for (String p : PACKAGES) {
                        if (n.startsWith(p) && n.indexOf('/', p.length()) < 0) {
                            classes.add(n.substring(0, n.length() - 6).replace('/', '.'));
                        }
                    }
                }
            }
        }
        for (String m : CLIENT_MESSAGES) classes.add("org.apache.kafka.common.message." + m);
        for (String name : classes) {
            Class<?> c = Class.forName(name);
            Field schemas;
            try {
                schemas = c.getField("SCHEMAS");
            } catch (NoSuchFieldException e) {
                continue; // not a generated message (an enum, a converter, a helper)
            }
            if (!Modifier.isStatic(schemas.getModifiers())) continue;
            Schema[] all = (Schema[]) schemas.get(null);
            short lowest = c.getField("LOWEST_SUPPORTED_VERSION").getShort(null);
            short highest = c.getField("HIGHEST_SUPPORTED_VERSION").getShort(null);
            Object instance = c.getConstructor().newInstance();
            String apiKey = instance instanceof ApiMessage ? String.valueOf(((ApiMessage) instance).apiKey()) : "null";
            StringBuilder out = new StringBuilder();
            out.append("{\"class\":\"").append(c.getSimpleName()).append("\",\"apiKey\":").append(apiKey)
                .append(",\"lowest\":").append(lowest).append(",\"highest\":").append(highest).append(",\"versions\":{");
            boolean first = true;
            for (int v = lowest; v <= highest; v++) {
                if (all[v] == null) continue;
                if (!first) out.append(',');
                first = false;
                out.append('"').append(v).append("\":");
                fields(all[v], out);
            }
            out.append("},\"defaults\":{");
            defaults(c, instance, out, new boolean[] {true});
            out.append("}}");
            System.out.println(out);
        }
    }

    /** The value of every field of a new instance (the definition's default), by class: "Outer" and
     * each nested struct's simple name, then the Java field's name ("previousProducerId"). */
    static void defaults(Class<?> c, Object instance, StringBuilder out, boolean[] first) throws Exception {
        if (!first[0]) out.append(',');
        first[0] = false;
        out.append('"').append(c.getSimpleName()).append("\":{");
        boolean f1 = true;
        for (Field f : c.getDeclaredFields()) {
            if (Modifier.isStatic(f.getModifiers()) || f.getName().startsWith("_")) continue;
            f.setAccessible(true);
            Object v = f.get(instance);
            if (v instanceof java.util.Collection) {
                if (!((java.util.Collection<?>) v).isEmpty()) continue;
            } else if (v != null && !(v instanceof Number || v instanceof Boolean || v instanceof String
                    || v instanceof org.apache.kafka.common.Uuid)) {
                continue;
            }
            if (!f1) out.append(',');
            f1 = false;
            out.append('"').append(f.getName()).append("\":");
            if (v instanceof String || v instanceof org.apache.kafka.common.Uuid) {
                out.append('"').append(v.toString().replace("\\", "\\\\").replace("\"", "\\\"")).append('"');
            } else if (v instanceof java.util.Collection) {
                out.append("[]");
            } else {
                out.append(v);
            }
        }
        out.append('}');
        for (Class<?> n : c.getDeclaredClasses()) {
            if (Modifier.isStatic(n.getModifiers()) && isMessage(n)) {
                defaults(n, n.getConstructor().newInstance(), out, first);
            }
        }
    }

    static boolean isMessage(Class<?> n) {
        return org.apache.kafka.common.protocol.Message.class.isAssignableFrom(n);
    }

    static void fields(Schema schema, StringBuilder out) throws Exception {
        out.append('[');
        boolean first = true;
        for (BoundField f : schema.fields()) {
            if (f.def.type instanceof TaggedFields) {
                Field m = TaggedFields.class.getDeclaredField("fields");
                m.setAccessible(true);
                @SuppressWarnings("unchecked")
                Map<Integer, org.apache.kafka.common.protocol.types.Field> tagged =
                    (Map<Integer, org.apache.kafka.common.protocol.types.Field>) m.get(f.def.type);
                for (Map.Entry<Integer, org.apache.kafka.common.protocol.types.Field> t : tagged.entrySet()) {
                    if (!first) out.append(',');
                    first = false;
                    field(t.getValue().name, String.valueOf(t.getKey()), t.getValue().type, out);
                }
                continue;
            }
            if (!first) out.append(',');
            first = false;
            field(f.def.name, "null", f.def.type, out);
        }
        out.append(']');
    }

    static void field(String name, String tag, Type type, StringBuilder out) throws Exception {
        out.append("{\"name\":\"").append(name).append("\",\"tag\":").append(tag).append(",\"type\":");
        type(type, out);
        out.append('}');
    }

    static void type(Type t, StringBuilder out) throws Exception {
        if (t instanceof Schema) {
            out.append("{\"struct\":");
            fields((Schema) t, out);
        } else if (t.isArray()) {
            out.append("{\"array\":");
            type(t.arrayElementType().get(), out);
        } else {
            out.append("{\"prim\":\"").append(t.toString()).append('"');
        }
        out.append(",\"nullable\":").append(t.isNullable()).append('}');
    }
}
