import java.io.File;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.StandardOpenOption;

/**
 * Locks a log dir's .lock exactly as a Kafka broker does (org.apache.kafka.server.util.FileLock, which
 * LogManager.lockLogDirs uses): FileChannel.open(CREATE, READ, WRITE), then tryLock(), i.e. an
 * exclusive lock of position 0, size Long.MAX_VALUE (on Linux: fcntl F_SETLK, F_WRLCK, whole file).
 *
 * Usage: BrokerDirLock hold|try FILE [PAUSE_MS]
 *   hold: prints "PID locked" (or "PID busy" and exits), then keeps the lock until stdin closes, then
 *         lets go as LogManager.shutdown does (FileLock.destroy: release, delete the file, close; PAUSE_MS
 *         between the release and the delete, 0 by default as in Kafka) and prints "released".
 *   try:  prints "PID locked" or "PID busy", lets go at once.
 */
public class BrokerDirLock {
    public static void main(String[] args) throws Exception {
        boolean hold = args[0].equals("hold");
        File file = new File(args[1]);
        long pauseMs = args.length > 2 ? Long.parseLong(args[2]) : 0;
        long pid = ProcessHandle.current().pid();
        FileChannel channel = FileChannel.open(file.toPath(), StandardOpenOption.CREATE, StandardOpenOption.READ,
                StandardOpenOption.WRITE);
        FileLock lock;
        try {
            lock = channel.tryLock();
        } catch (OverlappingFileLockException e) {
            lock = null;
        }
        if (lock == null) {
            System.out.println(pid + " busy");
            System.out.flush();
            channel.close();
            return;
        }
        System.out.println(pid + " locked");
        System.out.flush();
        if (hold) {
            while (System.in.read() != -1) {
                // the test closes stdin to let go
            }
        }
        lock.release();
        if (hold) {
            Thread.sleep(pauseMs);  // none in Kafka: the tests widen the moment between unlock and delete
            file.delete();
        }
        channel.close();
        if (hold) {
            System.out.println("released");
            System.out.flush();
        }
    }
}
