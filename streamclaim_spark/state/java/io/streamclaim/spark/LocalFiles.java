package io.streamclaim.spark;

import java.io.IOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Puts a finished temporary file in place on a local disk with Java's own file calls.
 *
 * <p>Hadoop's local file system, without its native library (pyspark ships none), starts a process for
 * every permission it sets ({@code chmod}) and every link it looks up ({@code readlink}): a Delta commit
 * through it started ~24, most of a local commit's time. These calls start none, and a file put in place
 * without overwriting is linked, which fails when the name exists: one winner, also between processes.
 */
final class LocalFiles {
    private LocalFiles() {}

    /** The local file behind {@code path}, or null when its file system is not the local disk. */
    static java.nio.file.Path localFile(Path path, Configuration hadoopConf) throws IOException {
        FileSystem fs = path.getFileSystem(hadoopConf);
        if (!"file".equals(fs.getUri().getScheme())) {
            return null;
        }
        return Paths.get(fs.makeQualified(path).toUri());
    }

    /**
     * Moves the finished {@code temp} to {@code target}. Without {@code overwrite} a hard link claims the
     * name (java.nio's FileAlreadyExistsException when another file holds it), then the temporary name is
     * removed; with it, an atomic rename replaces the file. Either way a checksum file Hadoop wrote beside
     * an earlier {@code target} is removed, or Hadoop would check the new bytes against it.
     */
    static void putInPlace(java.nio.file.Path temp, java.nio.file.Path target, boolean overwrite) throws IOException {
        java.nio.file.Path hadoopChecksum = target.resolveSibling("." + target.getFileName() + ".crc");
        try {
            if (overwrite) {
                Files.deleteIfExists(hadoopChecksum);
                Files.move(temp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            } else {
                Files.createLink(target, temp);
                Files.deleteIfExists(hadoopChecksum);
            }
        } catch (FileAlreadyExistsException e) {
            throw e;
        } catch (UnsupportedOperationException | FileSystemException e) {
            // A file system without hard links: a move that refuses an existing name (checked, then renamed).
            Files.move(temp, target);
        } finally {
            Files.deleteIfExists(temp);
        }
    }

    /**
     * Throws {@code error} from a method that declares no checked exception, as the Scala methods
     * overridden here throw Hadoop's IOExceptions (Spark catches its FileAlreadyExistsException by type).
     */
    @SuppressWarnings("unchecked")
    static <E extends Throwable> E unchecked(Throwable error) throws E {
        throw (E) error;
    }

    /** Whether a failed put-in-place means the name was taken (the caller lost a race). */
    static boolean nameTaken(IOException error) {
        return error instanceof FileAlreadyExistsException;
    }
}
