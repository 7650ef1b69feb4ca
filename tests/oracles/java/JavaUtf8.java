import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

/**
 * Java's own decoding of bytes as UTF-8, for tests/record/test_java_text.py: reads one hex string per line
 * on standard input and prints, per line, the UTF-16 code units of new String(bytes, UTF_8) as hex,
 * space-separated (an empty line for no bytes). Run as a single-file program: java JavaUtf8.java
 */
public class JavaUtf8 {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            String s = new String(HexFormat.of().parseHex(line), StandardCharsets.UTF_8);
            for (int i = 0; i < s.length(); i++) {
                out.append(i == 0 ? "" : " ").append(Integer.toHexString(s.charAt(i)));
            }
            out.append('\n');
        }
        System.out.print(out);
    }
}
