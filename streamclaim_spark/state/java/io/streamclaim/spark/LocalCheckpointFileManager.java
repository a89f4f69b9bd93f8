package io.streamclaim.spark;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.StandardOpenOption;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager;

/**
 * Spark's checkpoint file manager through Hadoop's {@code FileSystem}, writing local files without
 * starting a process.
 *
 * <p>Delta writes each version's checksum file ({@code N.crc}) through Spark's checkpoint file manager,
 * and Structured Streaming its offsets and commits: a temporary file, then a rename. On {@code file://}
 * the temporary file is created and put in place by {@link LocalFiles}; everything else, and every other
 * file system, is {@code FileSystemBasedCheckpointFileManager}'s.
 */
public class LocalCheckpointFileManager extends FileSystemBasedCheckpointFileManager {
    private final Configuration hadoopConf;

    public LocalCheckpointFileManager(Path path, Configuration hadoopConf) {
        super(path, hadoopConf);
        this.hadoopConf = hadoopConf;
    }

    @Override
    public FSDataOutputStream createTempFile(Path path) {
        try {
            java.nio.file.Path file = LocalFiles.localFile(path, hadoopConf);
            if (file == null) {
                return super.createTempFile(path);
            }
            return new FSDataOutputStream(
                    Files.newOutputStream(file, StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING,
                            StandardOpenOption.WRITE), null);
        } catch (IOException e) {
            throw LocalFiles.<RuntimeException>unchecked(e);
        }
    }

    @Override
    public void renameTempFile(Path srcPath, Path dstPath, boolean overwriteIfPossible) {
        try {
            java.nio.file.Path src = LocalFiles.localFile(srcPath, hadoopConf);
            java.nio.file.Path dst = LocalFiles.localFile(dstPath, hadoopConf);
            if (src == null || dst == null) {
                super.renameTempFile(srcPath, dstPath, overwriteIfPossible);
                return;
            }
            if (!overwriteIfPossible && Files.exists(dst)) {
                throw new org.apache.hadoop.fs.FileAlreadyExistsException(dstPath + " exists");
            }
            try {
                LocalFiles.putInPlace(src, dst, overwriteIfPossible);
            } catch (IOException e) {
                if (LocalFiles.nameTaken(e)) {
                    throw new org.apache.hadoop.fs.FileAlreadyExistsException(dstPath + " exists");
                }
                throw e;
            }
        } catch (IOException e) {
            throw LocalFiles.<RuntimeException>unchecked(e);
        }
    }
}
