// Kafka's own reader on segment files, for benchmarks/kafka_filerecords.py: for each file,
// FileRecords.open, then for every batch ensureValid() and for every record its offset, timestamp,
// key, value and headers through batch.streamingIterator with one caching BufferSupplier (what the
// consumer's CompletedFetch does), nothing built. Each file is read
// `warmup` times untimed (the JIT compiles the loop), then `rounds` times timed; the best round is
// printed as one line: <path> <records> <best nanoseconds>.
import java.io.File;
import java.nio.ByteBuffer;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.internal.FileLogInputStream.FileChannelRecordBatch;
import org.apache.kafka.common.record.internal.FileRecords;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.utils.BufferSupplier;
import org.apache.kafka.common.utils.CloseableIterator;

public class FileRecordsBench {
    static long sink;

    static final BufferSupplier BUFFERS = BufferSupplier.create();

    static long readOnce(File f) throws Exception {
        long n = 0;
        try (FileRecords fr = FileRecords.open(f, false)) {
            for (FileChannelRecordBatch batch : fr.batches()) {
                batch.ensureValid();
                try (CloseableIterator<Record> it = batch.streamingIterator(BUFFERS)) {
                  while (it.hasNext()) {
                    Record r = it.next();
                    sink += r.offset() + r.timestamp();
                    ByteBuffer k = r.key();
                    ByteBuffer v = r.value();
                    if (k != null) sink += k.remaining();
                    if (v != null) sink += v.remaining();
                    for (Header h : r.headers()) sink += h.key().length();
                    n++;
                  }
                }
            }
        }
        return n;
    }

    public static void main(String[] args) throws Exception {
        int warmup = Integer.parseInt(args[0]);
        int rounds = Integer.parseInt(args[1]);
        for (int i = 2; i < args.length; i++) {
            File f = new File(args[i]);
            long records = 0;
            for (int w = 0; w < warmup; w++) records = readOnce(f);
            long best = Long.MAX_VALUE;
            for (int r = 0; r < rounds; r++) {
                long t0 = System.nanoTime();
                readOnce(f);
                best = Math.min(best, System.nanoTime() - t0);
            }
            System.out.println(args[i] + " " + records + " " + best);
        }
        System.err.println("sink " + sink);
    }
}
