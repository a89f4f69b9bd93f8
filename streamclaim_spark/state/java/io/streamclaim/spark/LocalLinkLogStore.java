package io.streamclaim.spark;

import io.delta.storage.HDFSLogStore;
import io.delta.storage.HadoopFileSystemLogStore;
import java.io.BufferedOutputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.StandardOpenOption;
import java.util.Iterator;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Delta's log store for {@code file://} tables, writing a commit without starting a process.
 *
 * <p>Writes {@code N.json} as Delta's {@code HDFSLogStore} does (a temporary file beside it, then put in
 * place without overwriting, {@code java.nio.file.FileAlreadyExistsException} when the version is taken),
 * through {@link LocalFiles} instead of Hadoop's local file system. The put-in-place is a hard link, so two
 * processes committing one version get one winner (Hadoop's rename checks, then renames). Lists the log
 * from a name as {@link LocalFiles#listFrom} does: Hadoop's listing read every file's status, and a log
 * keeps every commit of its retention (30 days by default), where Delta asks for the few after the version
 * it holds. Reads are Delta's own. Any other file system goes to {@code HDFSLogStore} unchanged.
 */
public class LocalLinkLogStore extends HadoopFileSystemLogStore {
    private final HDFSLogStore other;

    public LocalLinkLogStore(Configuration initHadoopConf) {
        super(initHadoopConf);
        other = new HDFSLogStore(initHadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
            throws IOException {
        java.nio.file.Path target = LocalFiles.localFile(path, hadoopConf);
        if (target == null) {
            other.write(path, actions, overwrite, hadoopConf);
            return;
        }
        if (!overwrite && Files.exists(target)) {
            throw new java.nio.file.FileAlreadyExistsException(path.toString());
        }
        java.nio.file.Path temp = target.resolveSibling("." + target.getFileName() + "." + UUID.randomUUID() + ".tmp");
        try (OutputStream out = new BufferedOutputStream(
                Files.newOutputStream(temp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE))) {
            while (actions.hasNext()) {
                out.write((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
            }
        } catch (NoSuchFileException e) {
            Files.deleteIfExists(temp);
            throw new FileNotFoundException("No such file or directory: " + target.getParent());
        } catch (IOException | RuntimeException e) {
            Files.deleteIfExists(temp);
            throw e;
        }
        try {
            LocalFiles.putInPlace(temp, target, overwrite);
        } catch (IOException e) {
            if (LocalFiles.nameTaken(e)) {
                throw new java.nio.file.FileAlreadyExistsException(path.toString());
            }
            throw e;
        }
    }

    @Override
    public Iterator<FileStatus> listFrom(Path path, Configuration hadoopConf) throws IOException {
        FileSystem fs = path.getFileSystem(hadoopConf);
        if (!"file".equals(fs.getUri().getScheme())) {
            return other.listFrom(path, hadoopConf);
        }
        return LocalFiles.listFrom(fs, path).iterator();
    }

    /** As HDFSLogStore answers: Delta then serialises this JVM's commits to a table under its lock. */
    @Override
    public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
        return true;
    }
}
