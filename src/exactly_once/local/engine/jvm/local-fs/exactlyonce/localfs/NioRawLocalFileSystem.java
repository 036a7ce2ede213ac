package exactlyonce.localfs;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's raw local file system without the processes it starts when its native library is not
 * loaded (the pyspark wheel ships none): {@code chmod} for the permission of every file it
 * creates, {@code readlink} twice in every {@code FileContext} rename (Spark's checkpoint
 * files, Delta's commits through HDFSLogStore). Both become one system call through Java NIO.
 * Everything else, renames and their never-overwrite checks included, is Hadoop's own code.
 */
public class NioRawLocalFileSystem extends RawLocalFileSystem {

  /** As {@code chmod %04o}: the same bits, set by NIO. The sticky bit, which NIO cannot set,
   * goes to Hadoop's own implementation. */
  @Override
  public void setPermission(Path p, FsPermission permission) throws IOException {
    if (permission.getStickyBit()) {
      super.setPermission(p, permission);
      return;
    }
    Files.setPosixFilePermissions(pathToFile(p).toPath(), posix(permission.toShort()));
  }

  /** A path that is not a symbolic link has the status of its file (what Hadoop returns after
   * {@code readlink} printed nothing); links keep Hadoop's own handling. */
  @Override
  public FileStatus getFileLinkStatus(Path f) throws IOException {
    if (Files.isSymbolicLink(pathToFile(f).toPath())) {
      return super.getFileLinkStatus(f);
    }
    return getFileStatus(f);
  }

  static Set<PosixFilePermission> posix(short mode) {
    // PosixFilePermission's order is owner r/w/x, group r/w/x, others r/w/x: bits 8 down to 0.
    Set<PosixFilePermission> permissions = EnumSet.noneOf(PosixFilePermission.class);
    PosixFilePermission[] all = PosixFilePermission.values();
    for (int i = 0; i < all.length; i++) {
      if ((mode & (1 << (all.length - 1 - i))) != 0) {
        permissions.add(all[i]);
      }
    }
    return permissions;
  }
}
