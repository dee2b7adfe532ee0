// iceflight through the Apache Arrow Flight SQL JDBC driver (org.apache.arrow:flight-sql-jdbc-driver).
//
// A single-file program (no dependency but the driver jar), run by run.sh:
//   java --add-opens=java.base/java.nio=org.apache.arrow.memory.core,ALL-UNNAMED \
//        --add-opens=java.base/java.nio=ALL-UNNAMED -cp flight-sql-jdbc-driver-VERSION.jar JdbcTest.java
// Environment: ICEFLIGHT_URI (grpc://HOST:PORT, required), ICEFLIGHT_USER, ICEFLIGHT_PASSWORD,
// ICEFLIGHT_REPO (for bench/queries and bench/answers), ICEFLIGHT_TPCH_SCALE (default sf0.01).
// Prints PASS/FAIL per check, then "N passed, N failed"; exits 1 if any check failed, 2 on bad setup.
//
// What the driver (18.3.0) does on the wire: connect = Handshake (Basic auth) then, because the URL
// has catalog=local, DoAction SetSessionOptions {"catalog": "local"}; every Statement.executeQuery
// and Connection.prepareStatement = DoAction CreatePreparedStatement (an empty dataset_schema makes
// it treat the query as an UPDATE), then [DoPut parameters,] GetFlightInfo(PreparedStatementQuery),
// DoGet; Statement/PreparedStatement close = ClosePreparedStatement; connection close = CloseSession
// (only when catalog= was given). DatabaseMetaData: GetCatalogs, GetDbSchemas, GetTables
// (getColumns = GetTables with include_schema), GetTableTypes, GetSqlInfo with no ids (= all).

import java.lang.reflect.Method;
import java.math.BigDecimal;
import java.net.URI;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

public class JdbcTest {
  static final String CATALOG = "local";
  static final String SCHEMA = "tpch";
  static final List<String> TPCH_TABLES =
      Arrays.asList("customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier");
  static final double REL_TOL = 1e-9;

  static int passed = 0;
  static int failed = 0;

  interface Check {
    void run() throws Exception;
  }

  static void check(String name, Check body) {
    try {
      body.run();
      passed++;
      System.out.println("PASS " + name);
    } catch (Throwable t) {
      failed++;
      System.out.println("FAIL " + name + ": " + describe(t));
    }
    System.out.flush();
  }

  static String describe(Throwable t) {
    StringBuilder sb = new StringBuilder(String.valueOf(t));
    for (Throwable c = t.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
      sb.append("\n    caused by: ").append(c);
    }
    return sb.toString();
  }

  static void require(boolean cond, String message) {
    if (!cond) {
      throw new AssertionError(message);
    }
  }

  /** The sessions of this user that system.runtime.sessions lists. */
  static long liveSessions(Connection conn) throws SQLException {
    try (Statement st = conn.createStatement();
        ResultSet rs = st.executeQuery("SELECT count(*) FROM system.runtime.sessions")) {
      rs.next();
      return rs.getLong(1);
    }
  }

  static String env(String name, String dflt) {
    String v = System.getenv(name);
    return v == null || v.isEmpty() ? dflt : v;
  }

  static String enc(String s) {
    return URLEncoder.encode(s, StandardCharsets.UTF_8);
  }

  public static void main(String[] args) throws Exception {
    String uri = env("ICEFLIGHT_URI", null);
    if (uri == null) {
      System.out.println("FAIL setup: ICEFLIGHT_URI is not set (export ICEFLIGHT_URI=grpc://127.0.0.1:PORT)");
      System.out.println("0 passed, 1 failed");
      System.exit(2);
    }
    URI parsed = URI.create(uri);
    if (parsed.getHost() == null || parsed.getPort() < 0) {
      System.out.println("FAIL setup: ICEFLIGHT_URI must look like grpc://HOST:PORT, got " + uri);
      System.out.println("0 passed, 1 failed");
      System.exit(2);
    }
    String user = env("ICEFLIGHT_USER", "alice");
    String password = env("ICEFLIGHT_PASSWORD", "secret");
    Path repo = Path.of(env("ICEFLIGHT_REPO", "."));
    String scale = env("ICEFLIGHT_TPCH_SCALE", "sf0.01");
    Path answers = repo.resolve("bench/answers/tpch").resolve(scale);
    Path queries = repo.resolve("bench/queries/tpch");
    @SuppressWarnings("unchecked")
    Map<String, Object> tables = (Map<String, Object>) Json.parse(Files.readString(answers.resolve("tables.json")));

    String base = "jdbc:arrow-flight-sql://" + parsed.getHost() + ":" + parsed.getPort() + "/?useEncryption=false";
    String url = base + "&user=" + enc(user) + "&password=" + enc(password) + "&catalog=" + CATALOG;
    System.out.println("connecting to " + url.replace(enc(password), "***"));

    check("wrong password is refused as UNAUTHENTICATED", () -> {
      String bad = base + "&user=" + enc(user) + "&password=" + enc(password + "-wrong");
      try (Connection c = DriverManager.getConnection(bad)) {
        throw new AssertionError("connected with a wrong password");
      } catch (SQLException | RuntimeException e) {
        require(describe(e).toUpperCase().contains("UNAUTHENTICATED"), "not UNAUTHENTICATED: " + describe(e));
      }
    });

    Connection conn;
    try {
      conn = DriverManager.getConnection(url);
      passed++;
      System.out.println("PASS connect with user/password and catalog=" + CATALOG);
    } catch (SQLException e) {
      failed++;
      System.out.println("FAIL connect: " + describe(e));
      System.out.println(passed + " passed, " + failed + " failed");
      System.exit(1);
      return;
    }

    try {
      check("SELECT 1", () -> {
        try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery("SELECT 1")) {
          require(rs.next(), "no row");
          require(rs.getLong(1) == 1, "got " + rs.getObject(1));
          require(!rs.next(), "more than one row");
        }
      });

      for (String q : Arrays.asList("q01", "q06")) {
        check("TPC-H " + q + " equals the DuckDB answer", () -> {
          String sql = Files.readString(queries.resolve(q + ".sql")).replaceAll("\\blineitem\\b", SCHEMA + ".lineitem");
          @SuppressWarnings("unchecked")
          Map<String, Object> answer = (Map<String, Object>) Json.parse(Files.readString(answers.resolve(q + ".json")));
          try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery(sql)) {
            List<String> problems = compare(rs, answer);
            require(problems.isEmpty(), String.join("\n    ", problems));
          }
        });
      }

      // Written by the ADBC suite's bulk ingest (tests/flight/test_adbc.py), which
      // run_clients.sh runs first.
      check("reads the million rows ADBC ingested", () -> {
        try (Statement st = conn.createStatement();
            ResultSet rs = st.executeQuery("SELECT count(*), sum(id) FROM local.ingest.big")) {
          require(rs.next(), "no row");
          require(rs.getLong(1) == 1_000_000L && rs.getLong(2) == 499_999_500_000L,
              "got " + rs.getObject(1) + ", " + rs.getObject(2));
        }
      });

      check("executeUpdate INSERT returns the rows written", () -> {
        try (Statement st = conn.createStatement()) {
          st.executeUpdate("CREATE TABLE IF NOT EXISTS local.ingest.jdbc_rows (id BIGINT, name VARCHAR)");
          // `INSERT INTO local…` does not parse: sqlparser reads LOCAL there as a keyword
          // (Hive's INSERT … LOCAL DIRECTORY); quoted, it is the catalog's name.
          int n = st.executeUpdate("INSERT INTO \"local\".ingest.jdbc_rows VALUES (1, 'a'), (2, 'b'), (3, NULL)");
          require(n == 3, "executeUpdate returned " + n);
        }
      });

      check("executeUpdate DELETE returns the rows deleted", () -> {
        String table = "\"local\".ingest.jdbc_rows";
        String condition = "name IS NULL OR id = 1";
        long want;
        try (Statement st = conn.createStatement();
            ResultSet rs = st.executeQuery("SELECT count(*) FROM " + table + " WHERE " + condition)) {
          require(rs.next(), "no count");
          want = rs.getLong(1);
        }
        require(want > 0, "no row to delete");
        try (Statement st = conn.createStatement()) {
          int n = st.executeUpdate("DELETE FROM " + table + " WHERE " + condition);
          require(n == want, "executeUpdate returned " + n + ", " + want + " rows matched");
        }
        try (Statement st = conn.createStatement();
            ResultSet rs = st.executeQuery("SELECT count(*) FROM " + table + " WHERE " + condition)) {
          require(rs.next() && rs.getLong(1) == 0, "rows left that matched");
        }
      });

      check("executeUpdate UPDATE and MERGE return the rows changed", () -> {
        String table = "\"local\".ingest.jdbc_rows";
        try (Statement st = conn.createStatement()) {
          st.executeUpdate("INSERT INTO " + table + " VALUES (10, 'x'), (11, 'x'), (12, 'y')");
          int n = st.executeUpdate("UPDATE " + table + " SET name = 'z' WHERE name = 'x'");
          require(n == 2, "UPDATE: executeUpdate returned " + n);
          n = st.executeUpdate("MERGE INTO " + table + " AS t USING (VALUES (12, 'w'), (13, 'v')) AS s(id, name) "
              + "ON t.id = s.id WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.name)");
          require(n == 2, "MERGE: executeUpdate returned " + n);
        }
        try (Statement st = conn.createStatement();
            ResultSet rs = st.executeQuery("SELECT count(*) FILTER (WHERE name = 'z'), count(*) FILTER (WHERE id = 12), "
                + "count(*) FILTER (WHERE id = 13) FROM " + table)) {
          require(rs.next() && rs.getLong(1) == 2 && rs.getLong(2) == 0 && rs.getLong(3) == 1, "rows after UPDATE and MERGE");
        }
      });

      check("PreparedStatement INSERT: executeUpdate and executeBatch store the rows sent", () -> {
        String table = "\"local\".ingest.jdbc_params";
        try (Statement st = conn.createStatement()) {
          st.executeUpdate("CREATE SCHEMA IF NOT EXISTS local.ingest");
          st.executeUpdate("DROP TABLE IF EXISTS " + table);
          st.executeUpdate("CREATE TABLE " + table + " (id BIGINT, name VARCHAR, amount DECIMAL(10,2), d DATE)");
        }
        List<List<String>> sent = new ArrayList<>();
        try (PreparedStatement ps = conn.prepareStatement("INSERT INTO " + table + " VALUES (?, ?, ?, ?)")) {
          require(ps.getParameterMetaData().getParameterCount() == 4,
              "parameters: " + ps.getParameterMetaData().getParameterCount());
          // executeUpdate, executeBatch of 3, executeUpdate again: each its own rows, never the
          // parameters of the execution before.
          int[][] plan = {{1}, {2, 3, 4}, {5}, {6, 7}};
          for (int[] step : plan) {
            for (int id : step) {
              ps.setLong(1, id);
              if (id % 3 == 0) {
                ps.setNull(2, Types.VARCHAR);
              } else {
                ps.setString(2, "name " + id);
              }
              ps.setBigDecimal(3, new BigDecimal(id).movePointLeft(2));
              ps.setDate(4, java.sql.Date.valueOf(java.time.LocalDate.of(2026, 1, id)));
              sent.add(Arrays.asList(Long.toString(id), id % 3 == 0 ? "null" : "name " + id,
                  new BigDecimal(id).movePointLeft(2).toPlainString(), "2026-01-0" + id));
              if (step.length > 1) {
                ps.addBatch();
              }
            }
            if (step.length > 1) {
              int[] counts = ps.executeBatch();
              // The driver answers one count for the whole batch (one DoPut).
              require(Arrays.stream(counts).sum() == step.length, "executeBatch " + Arrays.toString(counts));
            } else {
              require(ps.executeUpdate() == 1, "executeUpdate of " + step[0]);
            }
          }
        }
        List<List<String>> stored = new ArrayList<>();
        try (Statement st = conn.createStatement();
            ResultSet rs = st.executeQuery("SELECT id, name, amount, d FROM " + table + " ORDER BY id")) {
          while (rs.next()) {
            stored.add(Arrays.asList(Long.toString(rs.getLong(1)), String.valueOf(rs.getString(2)),
                rs.getBigDecimal(3).toPlainString(), rs.getDate(4).toLocalDate().toString()));
          }
        }
        require(stored.equals(sent), "stored " + stored + ", sent " + sent);
        try (Statement st = conn.createStatement();
            ResultSet rs = st.executeQuery("SELECT count(*) FROM local.ingest.\"jdbc_params$snapshots\"")) {
          require(rs.next() && rs.getLong(1) == 4, "one snapshot per execution, got " + rs.getLong(1));
        }
      });

      check("PreparedStatement DELETE with a parameter, batched", () -> {
        String table = "\"local\".ingest.jdbc_params";
        try (PreparedStatement ps = conn.prepareStatement("DELETE FROM " + table + " WHERE id = ?")) {
          for (long id : new long[] {2, 4, 40}) {
            ps.setLong(1, id);
            ps.addBatch();
          }
          int[] counts = ps.executeBatch();
          require(Arrays.stream(counts).sum() == 2, "executeBatch " + Arrays.toString(counts));
        }
        List<String> left;
        try (Statement st = conn.createStatement()) {
          left = column(st.executeQuery("SELECT id FROM " + table + " ORDER BY id"), "id");
        }
        require(left.equals(List.of("1", "3", "5", "6", "7")), "left " + left);
      });

      check("PreparedStatement UPDATE with parameters, batched: each row its own values", () -> {
        String table = "\"local\".ingest.jdbc_params";
        try (PreparedStatement ps = conn.prepareStatement("UPDATE " + table + " SET name = ? WHERE id = ?")) {
          ps.setString(1, "u1");
          ps.setLong(2, 1);
          require(ps.executeUpdate() == 1, "executeUpdate");
          for (long id : new long[] {3, 5}) {
            ps.setString(1, "u" + id);
            ps.setLong(2, id);
            ps.addBatch();
          }
          int[] counts = ps.executeBatch();
          require(Arrays.stream(counts).sum() == 2, "executeBatch " + Arrays.toString(counts));
        }
        List<String> names;
        try (Statement st = conn.createStatement()) {
          names = column(st.executeQuery("SELECT name FROM " + table + " WHERE id IN (1, 3, 5) ORDER BY id"), "name");
        }
        require(names.equals(List.of("u1", "u3", "u5")), "names " + names);
      });

      check("Connection.close ends its session", () -> {
        String plain = base + "&user=" + enc(user) + "&password=" + enc(password);
        long before = liveSessions(conn);
        Connection other = DriverManager.getConnection(plain);
        try (Statement st = other.createStatement(); ResultSet rs = st.executeQuery("SELECT 1")) {
          require(rs.next(), "no row");
        }
        require(liveSessions(conn) == before + 1, "the second connection's session is not listed");
        other.close();
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (liveSessions(conn) != before && System.nanoTime() < deadline) {
          Thread.sleep(100);
        }
        require(liveSessions(conn) == before, "sessions after close: " + liveSessions(conn) + ", before " + before);
      });

      check("PreparedStatement with a parameter, executed 3 times", () -> {
        long[] bounds = {1000, 30000, 1_000_000_000L};
        long[] want = new long[bounds.length];
        StringBuilder sql = new StringBuilder("SELECT ");
        for (int i = 0; i < bounds.length; i++) {
          sql.append(i == 0 ? "" : ", ").append("sum(CASE WHEN l_orderkey < ").append(bounds[i]).append(" THEN 1 ELSE 0 END)");
        }
        sql.append(" FROM ").append(SCHEMA).append(".lineitem");
        try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery(sql.toString())) {
          require(rs.next(), "no row from " + sql);
          for (int i = 0; i < bounds.length; i++) {
            want[i] = rs.getLong(i + 1);
          }
        }
        require(want[0] != want[1] && want[1] != want[2], "bounds do not separate: " + Arrays.toString(want));
        try (PreparedStatement ps =
            conn.prepareStatement("SELECT count(*) FROM " + SCHEMA + ".lineitem WHERE l_orderkey < ?")) {
          require(ps.getParameterMetaData().getParameterCount() == 1,
              "parameter_schema should have 1 field, has " + ps.getParameterMetaData().getParameterCount());
          for (int i = 0; i < bounds.length; i++) {
            ps.setLong(1, bounds[i]);
            try (ResultSet rs = ps.executeQuery()) {
              require(rs.next(), "no row for " + bounds[i]);
              long got = rs.getLong(1);
              require(got == want[i], "l_orderkey < " + bounds[i] + ": got " + got + ", want " + want[i]);
            }
          }
        }
      });

      check("PreparedStatement with a string parameter", () -> {
        try (PreparedStatement ps =
            conn.prepareStatement("SELECT n_nationkey FROM " + SCHEMA + ".nation WHERE n_name = ?")) {
          ps.setString(1, "GERMANY");
          try (ResultSet rs = ps.executeQuery()) {
            require(rs.next() && rs.getLong(1) == 7 && !rs.next(), "GERMANY is not nation 7 alone");
          }
          ps.setString(1, "ATLANTIS");
          try (ResultSet rs = ps.executeQuery()) {
            require(!rs.next(), "ATLANTIS found");
          }
        }
      });

      check("one Statement reused 20 times", () -> {
        try (Statement st = conn.createStatement()) {
          for (int i = 0; i < 20; i++) {
            String sql = "SELECT " + i + " AS i, count(*) AS n FROM " + SCHEMA + ".nation WHERE n_nationkey < " + i;
            try (ResultSet rs = st.executeQuery(sql)) {
              require(rs.next(), "no row at iteration " + i);
              require(rs.getLong(1) == i && rs.getLong(2) == i,
                  "iteration " + i + ": got (" + rs.getLong(1) + ", " + rs.getLong(2) + ")");
            }
          }
        }
      });

      check("bad SQL raises the parser's message", () -> {
        try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery("SELEC 1")) {
          throw new AssertionError("SELEC 1 succeeded");
        } catch (SQLException | RuntimeException e) {
          String text = describe(e);
          require(text.contains("Expected: an SQL statement, found: SELEC"), "no parser message in: " + text);
        }
        try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery("SELECT 2")) {
          require(rs.next() && rs.getLong(1) == 2, "connection unusable after an error");
        }
      });

      DatabaseMetaData md = conn.getMetaData();

      check("DatabaseMetaData.getCatalogs", () -> {
        List<String> cats = column(md.getCatalogs(), "TABLE_CAT");
        require(cats.contains(CATALOG), "catalogs " + cats);
      });

      check("DatabaseMetaData.getSchemas", () -> {
        List<List<String>> rows = rows(md.getSchemas(CATALOG, SCHEMA), "TABLE_CATALOG", "TABLE_SCHEM");
        require(rows.equals(List.of(List.of(CATALOG, SCHEMA))), "getSchemas(local, tpch) = " + rows);
        List<String> all = column(md.getSchemas(), "TABLE_SCHEM");
        require(all.contains(SCHEMA), "getSchemas() = " + all);
        List<String> pattern = column(md.getSchemas(null, "tp%"), "TABLE_SCHEM");
        require(pattern.contains(SCHEMA), "getSchemas(null, tp%) = " + pattern);
      });

      check("DatabaseMetaData.getTables", () -> {
        List<List<String>> rows =
            rows(md.getTables(CATALOG, SCHEMA, "%", null), "TABLE_CAT", "TABLE_SCHEM", "TABLE_NAME", "TABLE_TYPE");
        TreeSet<String> names = new TreeSet<>();
        for (List<String> r : rows) {
          require(r.get(0).equals(CATALOG) && r.get(1).equals(SCHEMA) && r.get(3).equals("TABLE"), "row " + r);
          names.add(r.get(2));
        }
        require(new ArrayList<>(names).equals(TPCH_TABLES) && rows.size() == 8, "tables " + rows);
        List<String> line = column(md.getTables(null, SCHEMA, "line%", new String[] {"TABLE"}), "TABLE_NAME");
        require(line.equals(List.of("lineitem")), "line% = " + line);
        List<String> views = column(md.getTables(CATALOG, SCHEMA, "%", new String[] {"VIEW"}), "TABLE_NAME");
        require(views.isEmpty(), "views " + views);
        List<String> types = column(md.getTableTypes(), "TABLE_TYPE");
        require(types.contains("TABLE"), "table types " + types);
      });

      check("DatabaseMetaData.getColumns", () -> {
        @SuppressWarnings("unchecked")
        Map<String, Object> lineitem =
            (Map<String, Object>) ((Map<String, Object>) tables.get("lineitem")).get("columns");
        List<String> wantNames = new ArrayList<>(lineitem.keySet());
        List<String> names = new ArrayList<>();
        Map<String, int[]> types = new LinkedHashMap<>();
        try (ResultSet rs = md.getColumns(CATALOG, SCHEMA, "lineitem", "%")) {
          int ordinal = 0;
          while (rs.next()) {
            ordinal++;
            require(CATALOG.equals(rs.getString("TABLE_CAT")) && SCHEMA.equals(rs.getString("TABLE_SCHEM"))
                && "lineitem".equals(rs.getString("TABLE_NAME")), "row for another table: " + rs.getString("TABLE_NAME"));
            require(rs.getInt("ORDINAL_POSITION") == ordinal, "ORDINAL_POSITION " + rs.getInt("ORDINAL_POSITION"));
            String name = rs.getString("COLUMN_NAME");
            names.add(name);
            types.put(name, new int[] {rs.getInt("DATA_TYPE"), rs.getInt("COLUMN_SIZE"), rs.getInt("DECIMAL_DIGITS")});
          }
        }
        require(names.equals(wantNames), "columns " + names + ", want " + wantNames);
        require(types.get("l_orderkey")[0] == Types.BIGINT, "l_orderkey DATA_TYPE " + types.get("l_orderkey")[0]);
        // COLUMN_SIZE is the server's PRECISION key: digits, characters of a date, unbounded text.
        require(types.get("l_orderkey")[1] == 19, "l_orderkey COLUMN_SIZE " + types.get("l_orderkey")[1]);
        require(types.get("l_shipdate")[1] == 10, "l_shipdate COLUMN_SIZE " + types.get("l_shipdate")[1]);
        require(types.get("l_comment")[1] == Integer.MAX_VALUE, "l_comment COLUMN_SIZE " + types.get("l_comment")[1]);
        int[] qty = types.get("l_quantity");
        require(qty[0] == Types.DECIMAL && qty[1] == 15 && qty[2] == 2,
            "l_quantity DATA_TYPE/COLUMN_SIZE/DECIMAL_DIGITS " + Arrays.toString(qty));
        require(types.get("l_shipdate")[0] == Types.DATE, "l_shipdate DATA_TYPE " + types.get("l_shipdate")[0]);
        int s = types.get("l_comment")[0];
        require(s == Types.VARCHAR || s == Types.LONGVARCHAR, "l_comment DATA_TYPE " + s);
        List<String> rName = column(md.getColumns(null, SCHEMA, "region", "r_n%"), "COLUMN_NAME");
        require(rName.equals(List.of("r_name")), "region r_n% = " + rName);
      });

      check("DatabaseMetaData key and type calls answer", () -> {
        // A table without identifier fields has no primary key; Iceberg has no foreign keys. The
        // driver checks each column's Arrow type against its own schema, so a mismatch throws.
        List<String> keys = column(md.getPrimaryKeys(CATALOG, SCHEMA, "lineitem"), "COLUMN_NAME");
        require(keys.isEmpty(), "primary keys " + keys);
        List<String> imported = column(md.getImportedKeys(CATALOG, SCHEMA, "lineitem"), "PKTABLE_NAME");
        require(imported.isEmpty(), "imported keys " + imported);
        List<String> exported = column(md.getExportedKeys(CATALOG, SCHEMA, "orders"), "FKTABLE_NAME");
        require(exported.isEmpty(), "exported keys " + exported);
        // Driver 18.3.0 limit: getTypeInfo is Avatica's empty result, never GetXdbcTypeInfo (the
        // server's types are tested over Flight SQL in server/tests/flight.rs); a driver that
        // asks the server must find BIGINT among them.
        List<String> typeInfo = column(md.getTypeInfo(), "TYPE_NAME");
        require(typeInfo.isEmpty() || typeInfo.contains("BIGINT"), "getTypeInfo " + typeInfo);
      });

      check("DatabaseMetaData backed by GetSqlInfo", () -> {
        String product = md.getDatabaseProductName();
        String version = md.getDatabaseProductVersion();
        require(product != null && !product.isEmpty(), "no FLIGHT_SQL_SERVER_NAME");
        require(version != null && !version.isEmpty(), "no FLIGHT_SQL_SERVER_VERSION");
        System.out.println("    server: " + product + " " + version + ", quote " + md.getIdentifierQuoteString());
        // Methods BI tools call; each reads one SqlInfo id and throws (NPE) when the id is missing.
        String[] methods = {
          "getIdentifierQuoteString", "isReadOnly", "getSQLKeywords", "getNumericFunctions",
          "getStringFunctions", "getSystemFunctions", "getTimeDateFunctions", "getSearchStringEscape",
          "getExtraNameCharacters", "supportsColumnAliasing", "nullPlusNonNullIsNull", "supportsConvert",
          "supportsTableCorrelationNames", "supportsDifferentTableCorrelationNames",
          "supportsExpressionsInOrderBy", "supportsOrderByUnrelated", "supportsGroupBy",
          "supportsGroupByUnrelated", "supportsLikeEscapeClause", "supportsNonNullableColumns",
          "supportsMinimumSQLGrammar", "supportsCoreSQLGrammar", "supportsExtendedSQLGrammar",
          "supportsANSI92EntryLevelSQL", "supportsANSI92IntermediateSQL", "supportsANSI92FullSQL",
          "supportsIntegrityEnhancementFacility", "supportsOuterJoins", "supportsFullOuterJoins",
          "supportsLimitedOuterJoins", "getSchemaTerm", "getProcedureTerm", "getCatalogTerm",
          "isCatalogAtStart", "supportsSchemasInDataManipulation", "supportsCatalogsInDataManipulation",
          "supportsPositionedDelete", "supportsSelectForUpdate", "supportsStoredProcedures",
          "supportsSubqueriesInComparisons", "supportsSubqueriesInExists", "supportsSubqueriesInIns",
          "supportsCorrelatedSubqueries", "supportsUnion", "supportsUnionAll", "getMaxColumnNameLength",
          "getMaxColumnsInGroupBy", "getMaxColumnsInSelect", "getMaxConnections", "getMaxStatementLength",
          "getMaxTableNameLength", "getDefaultTransactionIsolation", "supportsTransactions",
          "supportsBatchUpdates", "supportsSavepoints", "supportsNamedParameters",
        };
        List<String> broken = new ArrayList<>();
        for (String m : methods) {
          try {
            Method method = DatabaseMetaData.class.getMethod(m);
            method.invoke(md);
          } catch (java.lang.reflect.InvocationTargetException e) {
            broken.add(m + " (" + e.getCause() + ")");
          }
        }
        require(broken.isEmpty(), broken.size() + " methods fail:\n    " + String.join("\n    ", broken));
      });
    } finally {
      check("close the connection (CloseSession)", () -> {
        try {
          conn.close();
        } catch (SQLException e) {
          // Driver 18.3.0 bug: ArrowFlightConnection.close() closes its client handler twice, and
          // the second close sends CloseSession again on the channel the first one shut down. Any
          // other error (e.g. a bad answer to the first CloseSession) is the server's.
          if (!describe(e).contains("Channel shutdown invoked")) {
            throw e;
          }
        }
      });
    }

    System.out.println(passed + " passed, " + failed + " failed");
    System.exit(failed == 0 ? 0 : 1);
  }

  // ------------------------------------------------------------------ result comparison

  /** Compares a result set with a DuckDB answer ({"columns","types","rows"}) by position, in order. */
  static List<String> compare(ResultSet rs, Map<String, Object> answer) throws SQLException {
    @SuppressWarnings("unchecked")
    List<Object> wantRows = (List<Object>) answer.get("rows");
    @SuppressWarnings("unchecked")
    List<Object> wantTypes = (List<Object>) answer.get("types");
    List<String> problems = new ArrayList<>();
    ResultSetMetaData meta = rs.getMetaData();
    int n = meta.getColumnCount();
    if (n != wantTypes.size()) {
      problems.add(n + " columns, want " + wantTypes.size());
      return problems;
    }
    int r = 0;
    while (rs.next()) {
      if (r >= wantRows.size()) {
        r++;
        continue;
      }
      @SuppressWarnings("unchecked")
      List<Object> want = (List<Object>) wantRows.get(r);
      for (int c = 1; c <= n; c++) {
        String w = (String) want.get(c - 1);
        String wantType = (String) wantTypes.get(c - 1);
        String problem = compareCell(rs, meta, c, w, wantType);
        if (problem != null && problems.size() < 10) {
          problems.add("row " + r + " column " + (c - 1) + " (" + meta.getColumnName(c) + "): " + problem);
        }
      }
      r++;
    }
    if (r != wantRows.size()) {
      problems.add(r + " rows, want " + wantRows.size());
    }
    return problems;
  }

  static String compareCell(ResultSet rs, ResultSetMetaData meta, int c, String want, String wantType)
      throws SQLException {
    Object raw = rs.getObject(c);
    if (raw == null || want == null) {
      return raw == null && want == null ? null : "got " + raw + ", want " + want;
    }
    int type = meta.getColumnType(c);
    switch (type) {
      case Types.DECIMAL:
      case Types.NUMERIC: {
        BigDecimal g = rs.getBigDecimal(c);
        BigDecimal w = new BigDecimal(want);
        if (wantType.equals("DOUBLE") || wantType.equals("FLOAT") || wantType.equals("REAL")) {
          BigDecimal tol = BigDecimal.ONE.scaleByPowerOfTen(-meta.getScale(c))
              .max(w.abs().multiply(BigDecimal.valueOf(REL_TOL)));
          return g.subtract(w).abs().compareTo(tol) <= 0 ? null
              : "got " + g + " (decimal scale " + meta.getScale(c) + "), want " + want + " (" + wantType + ")";
        }
        return g.compareTo(w) == 0 ? null : "got " + g + ", want " + want + " (" + wantType + ")";
      }
      case Types.DOUBLE:
      case Types.FLOAT:
      case Types.REAL: {
        double g = rs.getDouble(c);
        double w = Double.parseDouble(want);
        return Math.abs(g - w) <= REL_TOL * Math.max(Math.abs(g), Math.abs(w)) ? null
            : "got " + g + ", want " + want + " (" + wantType + ")";
      }
      case Types.TINYINT:
      case Types.SMALLINT:
      case Types.INTEGER:
      case Types.BIGINT: {
        BigDecimal g = new BigDecimal(rs.getString(c));
        return g.compareTo(new BigDecimal(want)) == 0 ? null : "got " + g + ", want " + want;
      }
      default: {
        String g = rs.getString(c);
        return want.equals(g) ? null : "got '" + g + "' (JDBC type " + type + "), want '" + want + "'";
      }
    }
  }

  static List<String> column(ResultSet rs, String name) throws SQLException {
    List<String> out = new ArrayList<>();
    try (rs) {
      while (rs.next()) {
        out.add(rs.getString(name));
      }
    }
    return out;
  }

  static List<List<String>> rows(ResultSet rs, String... names) throws SQLException {
    List<List<String>> out = new ArrayList<>();
    try (rs) {
      while (rs.next()) {
        List<String> row = new ArrayList<>();
        for (String n : names) {
          row.add(rs.getString(n));
        }
        out.add(row);
      }
    }
    return out;
  }

  // ------------------------------------------------------------------ minimal JSON reader

  /** Objects become LinkedHashMap (key order kept), arrays ArrayList, numbers their text. */
  static final class Json {
    private final String s;
    private int i;

    private Json(String s) {
      this.s = s;
    }

    static Object parse(String text) {
      Json p = new Json(text);
      Object v = p.value();
      p.ws();
      if (p.i != p.s.length()) {
        throw new IllegalArgumentException("trailing text at " + p.i);
      }
      return v;
    }

    private void ws() {
      while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
        i++;
      }
    }

    private Object value() {
      ws();
      char c = s.charAt(i);
      if (c == '{') {
        Map<String, Object> m = new LinkedHashMap<>();
        i++;
        ws();
        if (s.charAt(i) == '}') {
          i++;
          return m;
        }
        while (true) {
          ws();
          String k = string();
          ws();
          expect(':');
          m.put(k, value());
          ws();
          if (s.charAt(i) == ',') {
            i++;
          } else {
            expect('}');
            return m;
          }
        }
      }
      if (c == '[') {
        List<Object> l = new ArrayList<>();
        i++;
        ws();
        if (s.charAt(i) == ']') {
          i++;
          return l;
        }
        while (true) {
          l.add(value());
          ws();
          if (s.charAt(i) == ',') {
            i++;
          } else {
            expect(']');
            return l;
          }
        }
      }
      if (c == '"') {
        return string();
      }
      if (s.startsWith("null", i)) {
        i += 4;
        return null;
      }
      if (s.startsWith("true", i)) {
        i += 4;
        return Boolean.TRUE;
      }
      if (s.startsWith("false", i)) {
        i += 5;
        return Boolean.FALSE;
      }
      int start = i;
      while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) {
        i++;
      }
      if (start == i) {
        throw new IllegalArgumentException("unexpected '" + c + "' at " + i);
      }
      return s.substring(start, i);
    }

    private void expect(char c) {
      if (s.charAt(i) != c) {
        throw new IllegalArgumentException("expected '" + c + "' at " + i);
      }
      i++;
    }

    private String string() {
      expect('"');
      StringBuilder sb = new StringBuilder();
      while (true) {
        char c = s.charAt(i++);
        if (c == '"') {
          return sb.toString();
        }
        if (c != '\\') {
          sb.append(c);
          continue;
        }
        char e = s.charAt(i++);
        switch (e) {
          case 'n': sb.append('\n'); break;
          case 't': sb.append('\t'); break;
          case 'r': sb.append('\r'); break;
          case 'b': sb.append('\b'); break;
          case 'f': sb.append('\f'); break;
          case 'u': sb.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
          default: sb.append(e);
        }
      }
    }
  }
}
