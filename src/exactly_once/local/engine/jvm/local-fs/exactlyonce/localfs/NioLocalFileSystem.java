package exactlyonce.localfs;

import org.apache.hadoop.fs.LocalFileSystem;

/** Hadoop's {@code LocalFileSystem} (checksums over the raw file system) over
 * {@link NioRawLocalFileSystem}: {@code fs.file.impl}, what {@code FileSystem.get} returns for
 * {@code file:} paths. */
public class NioLocalFileSystem extends LocalFileSystem {
  public NioLocalFileSystem() {
    super(new NioRawLocalFileSystem());
  }
}
