import java.nio.ByteBuffer;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.time.temporal.ChronoUnit;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.data.IcebergGenerics;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.apache.iceberg.types.Types;

/**
 * Apache Iceberg's own Java library reading the tables klog sync wrote into its embedded catalog
 * (pyiceberg's SQL catalog on SQLite), the oracle of tests/tables/test_sync_oracles.py.
 *
 * <p>Usage: {@code IcebergRead WAREHOUSE_DIR NAMESPACE.TABLE...}. The catalog is Iceberg's
 * JdbcCatalog named "klog" on {@code jdbc:sqlite:WAREHOUSE_DIR/catalog.db}, opened read-only. For
 * each table it prints {@code #TABLE name}, the current snapshot's summary property klog.offsets
 * ({@code #OFFSETS json}), the table's schema ({@code #SCHEMA text}), then every row of a full scan
 * (IcebergGenerics) as one JSON object per line, then {@code #END name rows=N}. Binary values are
 * base64, timestamps microseconds since the epoch, lists JSON arrays, structs JSON objects; a null
 * is null.
 */
public final class IcebergRead {
  private IcebergRead() {}

  public static void main(String[] args) throws Exception {
    String warehouse = args[0];
    Map<String, String> props = new HashMap<>();
    props.put("uri", "jdbc:sqlite:" + warehouse + "/catalog.db");
    props.put("warehouse", "file://" + warehouse);
    props.put("jdbc.open_mode", "1"); // SQLite's SQLITE_OPEN_READONLY: the oracle changes nothing
    JdbcCatalog catalog = new JdbcCatalog();
    catalog.setConf(new Configuration());
    catalog.initialize("klog", props);
    StringBuilder out = new StringBuilder();
    try {
      for (int i = 1; i < args.length; i++) {
        Table table = catalog.loadTable(TableIdentifier.parse(args[i]));
        Snapshot snap = table.currentSnapshot();
        out.append("#TABLE ").append(args[i]).append('\n');
        String offsets = snap == null ? null : snap.summary().get("klog.offsets");
        out.append("#OFFSETS ").append(offsets == null ? "null" : offsets).append('\n');
        out.append("#SCHEMA ").append(table.schema().asStruct().toString().replace('\n', ' ')).append('\n');
        long rows = 0;
        try (CloseableIterable<Record> records = IcebergGenerics.read(table).build()) {
          for (Record r : records) {
            json(out, r);
            out.append('\n');
            rows++;
            if (out.length() > (1 << 20)) {
              System.out.print(out);
              out.setLength(0);
            }
          }
        }
        out.append("#END ").append(args[i]).append(" rows=").append(rows).append('\n');
      }
    } finally {
      catalog.close();
    }
    System.out.print(out);
    System.out.flush();
  }

  private static void json(StringBuilder out, Object v) {
    if (v == null) {
      out.append("null");
    } else if (v instanceof Record) {
      Record r = (Record) v;
      List<Types.NestedField> fields = r.struct().fields();
      out.append('{');
      for (int i = 0; i < fields.size(); i++) {
        if (i > 0) {
          out.append(',');
        }
        string(out, fields.get(i).name());
        out.append(':');
        json(out, r.get(i));
      }
      out.append('}');
    } else if (v instanceof List) {
      out.append('[');
      boolean first = true;
      for (Object e : (List<?>) v) {
        if (!first) {
          out.append(',');
        }
        first = false;
        json(out, e);
      }
      out.append(']');
    } else if (v instanceof ByteBuffer) {
      ByteBuffer b = ((ByteBuffer) v).duplicate();
      byte[] bytes = new byte[b.remaining()];
      b.get(bytes);
      string(out, Base64.getEncoder().encodeToString(bytes));
    } else if (v instanceof byte[]) {
      string(out, Base64.getEncoder().encodeToString((byte[]) v));
    } else if (v instanceof OffsetDateTime) {
      out.append(ChronoUnit.MICROS.between(Instant.EPOCH, ((OffsetDateTime) v).toInstant()));
    } else if (v instanceof LocalDateTime) {
      out.append(ChronoUnit.MICROS.between(Instant.EPOCH, ((LocalDateTime) v).toInstant(ZoneOffset.UTC)));
    } else if (v instanceof CharSequence) {
      string(out, v.toString());
    } else if (v instanceof Number || v instanceof Boolean) {
      out.append(v);
    } else {
      throw new IllegalArgumentException("no JSON form for " + v.getClass() + ": " + v);
    }
  }

  private static void string(StringBuilder out, String s) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      } else if (c < 0x20 || c >= 0x7f) { // ASCII out, whatever the platform charset
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    out.append('"');
  }
}
