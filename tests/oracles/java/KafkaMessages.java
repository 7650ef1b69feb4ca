// Test oracle: Kafka's own generated message classes (kafka-clients 4.3.0) read bytes klog's
// tests wrote and write them again. One request per stdin line: "<class> <version> <base64>",
// the class a message of org.apache.kafka.common.message (ConsumerProtocolSubscription, ...).
// One answer per line: "OK <base64 of Kafka's serialization> <bytes left unread> <toString()>"
// or "ERR <exception>: <message>".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.InvocationTargetException;
import java.nio.ByteBuffer;
import java.util.Base64;

import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.protocol.Readable;

public class KafkaMessages {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        String line;
        while ((line = in.readLine()) != null) {
            String[] p = line.split(" ");
            try {
                Class<?> c = Class.forName("org.apache.kafka.common.message." + p[0]);
                short version = Short.parseShort(p[1]);
                ByteBuffer buf = ByteBuffer.wrap(Base64.getDecoder().decode(p.length > 2 ? p[2] : ""));
                Message m = (Message) c.getConstructor(Readable.class, short.class)
                    .newInstance(new ByteBufferAccessor(buf), version);
                ByteBuffer out = MessageUtil.toByteBufferAccessor(m, version).buffer();
                out.rewind();
                byte[] b = new byte[out.remaining()];
                out.get(b);
                System.out.println("OK " + Base64.getEncoder().encodeToString(b) + " " + buf.remaining() + " "
                    + m.toString().replace('\n', ' '));
            } catch (Throwable e) {
                Throwable t = e instanceof InvocationTargetException ? e.getCause() : e;
                System.out.println("ERR " + t.getClass().getSimpleName() + ": "
                    + String.valueOf(t.getMessage()).replace('\n', ' '));
            }
        }
    }
}
