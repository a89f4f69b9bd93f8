package io.streamclaim.spark;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.NotDirectoryException;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
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
     * The files of {@code path}'s folder on the local file system {@code fs} whose names sort at or after
     * {@code path}'s, sorted by name: what Hadoop's listing answers to Delta's {@code listFrom} (Hadoop's own
     * {@code .name.crc} checksum files left out, a file removed meanwhile skipped; a missing folder is
     * FileNotFoundException), with the status read only of the files returned. Hadoop's read every file's.
     */
    static List<FileStatus> listFrom(FileSystem fs, Path path) throws IOException {
        Path folder = fs.makeQualified(path.getParent());
        String from = path.getName();
        java.nio.file.Path local = Paths.get(folder.toUri());
        List<String> names = new ArrayList<>();
        try (DirectoryStream<java.nio.file.Path> entries = Files.newDirectoryStream(local)) {
            for (java.nio.file.Path entry : entries) {
                String name = entry.getFileName().toString();
                if (name.compareTo(from) >= 0 && !(name.startsWith(".") && name.endsWith(".crc"))) {
                    names.add(name);
                }
            }
        } catch (NoSuchFileException | NotDirectoryException e) {
            throw new FileNotFoundException("File " + folder + " does not exist");
        }
        names.sort(null);
        long blockSize = fs.getDefaultBlockSize(folder);
        List<FileStatus> files = new ArrayList<>(names.size());
        for (String name : names) {
            BasicFileAttributes attributes;
            try {
                attributes = Files.readAttributes(local.resolve(name), BasicFileAttributes.class);
            } catch (NoSuchFileException e) {
                continue;
            }
            files.add(new FileStatus(attributes.size(), attributes.isDirectory(), 1, blockSize,
                    attributes.lastModifiedTime().toMillis(), new Path(folder, name)));
        }
        return files;
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
