package exactlyonce.catalog;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.analysis.NamespaceAlreadyExistsException;
import org.apache.spark.sql.catalyst.analysis.NoSuchNamespaceException;
import org.apache.spark.sql.catalyst.analysis.NoSuchTableException;
import org.apache.spark.sql.catalyst.analysis.NonEmptyNamespaceException;
import org.apache.spark.sql.catalyst.analysis.TableAlreadyExistsException;
import org.apache.spark.sql.connector.catalog.CatalogPlugin;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.NamespaceChange;
import org.apache.spark.sql.connector.catalog.SupportsNamespaces;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.connector.catalog.TableChange;
import org.apache.spark.sql.connector.catalog.TableInfo;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * One catalog of the local runtime's catalog (src/exactly_once/local/catalog/): the catalog
 * level that Spark's session catalog lacks, over Delta's own tables.
 *
 * <p>Registered as {@code spark.sql.catalog.<name>}, it serves {@code <name>.<schema>.<table>}
 * from the directory {@code <root>/<name>/<schema>/<table>}, where {@code <root>} is read from
 * the session's {@code exactlyonce.catalog.root} at every call (so one warm session can serve
 * one test's catalog, then the next's). An entry is either a Delta table itself (a table the
 * catalog owns, such as one seeded from a fixture file) or a directory holding a
 * {@code _location} file: the location of a table a pipeline publishes and stores elsewhere.
 * A Delta table carries its own schema, properties and comments, so a name and a location are
 * all the catalog keeps. Loading, creating and altering a table go to the session's Delta
 * catalog by path, exactly as {@code delta.`/path`} does.
 */
public class LocalCatalog implements TableCatalog, SupportsNamespaces {
  public static final String ROOT_KEY = "spark.exactlyonce.catalog.root";
  public static final String LOCATION_FILE = "_location";
  private static final String DELTA_LOG = "_delta_log";

  private String name;
  private String rootOption;

  @Override
  public void initialize(String name, CaseInsensitiveStringMap options) {
    this.name = name;
    this.rootOption = options.get("root");
  }

  @Override
  public String name() {
    return name;
  }

  // -- where things are ---------------------------------------------------------------------
  private Path catalogDir() {
    String root = SQLConf.get().getConfString(ROOT_KEY, rootOption);
    if (root == null || root.isEmpty()) {
      throw new IllegalStateException("catalog " + name + ": no " + ROOT_KEY + " is set");
    }
    return Paths.get(root, name);
  }

  private Path namespaceDir(String[] namespace) {
    if (namespace.length != 1) {
      throw new IllegalArgumentException("catalog " + name + " has schemas one level deep, got "
          + String.join(".", namespace));
    }
    return catalogDir().resolve(namespace[0]);
  }

  private Path entryDir(Identifier ident) {
    return namespaceDir(ident.namespace()).resolve(ident.name());
  }

  /** The table's location, or null when the catalog has no table of that name. */
  private String location(Identifier ident) {
    if (ident.namespace().length != 1) {
      return null;
    }
    Path entry = entryDir(ident);
    Path pointer = entry.resolve(LOCATION_FILE);
    try {
      if (Files.isRegularFile(pointer)) {
        return new String(Files.readAllBytes(pointer), StandardCharsets.UTF_8).trim();
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return Files.isDirectory(entry.resolve(DELTA_LOG)) ? entry.toAbsolutePath().toString() : null;
  }

  private static TableCatalog delta() {
    org.apache.spark.sql.classic.SparkSession spark =
        (org.apache.spark.sql.classic.SparkSession) SparkSession.active();
    CatalogPlugin session = spark.sessionState().catalogManager().v2SessionCatalog();
    return (TableCatalog) session;
  }

  private static Identifier byPath(String location) {
    return Identifier.of(new String[] {"delta"}, location);
  }

  // -- tables --------------------------------------------------------------------------------
  @Override
  public Identifier[] listTables(String[] namespace) throws NoSuchNamespaceException {
    Path dir = namespaceDir(namespace);
    if (!Files.isDirectory(dir)) {
      throw new NoSuchNamespaceException(qualified(namespace));
    }
    List<Identifier> found = new ArrayList<>();
    for (Path entry : children(dir)) {
      Identifier ident = Identifier.of(namespace, entry.getFileName().toString());
      if (location(ident) != null) {
        found.add(ident);
      }
    }
    return found.toArray(new Identifier[0]);
  }

  @Override
  public Table loadTable(Identifier ident) throws NoSuchTableException {
    String location = location(ident);
    if (location == null) {
      throw new NoSuchTableException(shown(ident));
    }
    return delta().loadTable(byPath(location));
  }

  @Override
  public boolean tableExists(Identifier ident) {
    return location(ident) != null;
  }

  @Override
  public Table createTable(Identifier ident, TableInfo info)
      throws TableAlreadyExistsException, NoSuchNamespaceException {
    if (location(ident) != null) {
      throw new TableAlreadyExistsException(shown(ident));
    }
    if (!Files.isDirectory(namespaceDir(ident.namespace()))) {
      throw new NoSuchNamespaceException(qualified(ident.namespace()));
    }
    String location = entryDir(ident).toAbsolutePath().toString();
    return delta().createTable(byPath(location), info);
  }

  @Override
  public Table alterTable(Identifier ident, TableChange... changes) throws NoSuchTableException {
    String location = location(ident);
    if (location == null) {
      throw new NoSuchTableException(shown(ident));
    }
    return delta().alterTable(byPath(location), changes);
  }

  /** Forgets the name. A table the catalog owns (its entry is the Delta table) goes with it;
   * a published table stays where its pipeline stores it, as a pipeline's table outlives a
   * dropped name on Databricks until the pipeline is deleted. */
  @Override
  public boolean dropTable(Identifier ident) {
    if (location(ident) == null) {
      return false;
    }
    deleteTree(entryDir(ident));
    return true;
  }

  @Override
  public void renameTable(Identifier oldIdent, Identifier newIdent) {
    throw new UnsupportedOperationException("catalog " + name + ": RENAME TABLE is not "
        + "supported by the local catalog");
  }

  // -- schemas -------------------------------------------------------------------------------
  @Override
  public String[][] listNamespaces() {
    Path dir = catalogDir();
    if (!Files.isDirectory(dir)) {
      return new String[0][];
    }
    List<String[]> found = new ArrayList<>();
    for (Path child : children(dir)) {
      found.add(new String[] {child.getFileName().toString()});
    }
    return found.toArray(new String[0][]);
  }

  @Override
  public String[][] listNamespaces(String[] namespace) throws NoSuchNamespaceException {
    if (namespace.length == 0) {
      return listNamespaces();
    }
    if (!namespaceExists(namespace)) {
      throw new NoSuchNamespaceException(qualified(namespace));
    }
    return new String[0][];
  }

  @Override
  public boolean namespaceExists(String[] namespace) {
    return namespace.length == 1 && Files.isDirectory(namespaceDir(namespace));
  }

  @Override
  public Map<String, String> loadNamespaceMetadata(String[] namespace)
      throws NoSuchNamespaceException {
    if (!namespaceExists(namespace)) {
      throw new NoSuchNamespaceException(qualified(namespace));
    }
    return Collections.emptyMap();
  }

  @Override
  public void createNamespace(String[] namespace, Map<String, String> metadata)
      throws NamespaceAlreadyExistsException {
    if (namespaceExists(namespace)) {
      throw new NamespaceAlreadyExistsException(qualified(namespace));
    }
    try {
      Files.createDirectories(namespaceDir(namespace));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  @Override
  public void alterNamespace(String[] namespace, NamespaceChange... changes) {
    throw new UnsupportedOperationException("catalog " + name + ": schemas of the local "
        + "catalog have no properties");
  }

  @Override
  public boolean dropNamespace(String[] namespace, boolean cascade)
      throws NoSuchNamespaceException, NonEmptyNamespaceException {
    if (!namespaceExists(namespace)) {
      throw new NoSuchNamespaceException(qualified(namespace));
    }
    if (!cascade && listTables(namespace).length > 0) {
      throw new NonEmptyNamespaceException(qualified(namespace));
    }
    deleteTree(namespaceDir(namespace));
    return true;
  }

  // -- helpers -------------------------------------------------------------------------------
  private String[] qualified(String[] namespace) {
    String[] parts = new String[namespace.length + 1];
    parts[0] = name;
    System.arraycopy(namespace, 0, parts, 1, namespace.length);
    return parts;
  }

  /** The identifier with this catalog's name in front, as errors show it. */
  private Identifier shown(Identifier ident) {
    return Identifier.of(qualified(ident.namespace()), ident.name());
  }

  private static List<Path> children(Path dir) {
    List<Path> found = new ArrayList<>();
    try (DirectoryStream<Path> entries = Files.newDirectoryStream(dir)) {
      for (Path entry : entries) {
        String file = entry.getFileName().toString();
        if (Files.isDirectory(entry) && !file.startsWith(".") && !file.startsWith("_")) {
          found.add(entry);
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    Collections.sort(found);
    return found;
  }

  private static void deleteTree(Path dir) {
    try (java.util.stream.Stream<Path> walk = Files.walk(dir)) {
      walk.sorted(Collections.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
