// A shared iceflight through the Apache Arrow Flight SQL JDBC driver: users who are not admins
// see in DatabaseMetaData only the tables the rules give them, are refused what they may not
// do, and a bearer JWT (the driver's `token` property) logs in as its user.
//
// Run by run.sh SecurityTest.java (run_clients.sh suite `jdbc-security`) against the server of
// server/tests/security.rs. Environment: ICEFLIGHT_URI (grpc://HOST:PORT), ICEFLIGHT_SECURITY_DIR
// (the lab: outside/), ICEFLIGHT_JWT_DIR (tokens of tests/fixtures/jwt_tokens.py). Users as in
// tests/flight/test_security.py. Prints PASS/FAIL per check, then "N passed, N failed"; exits 1
// if any check failed.

import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.TreeSet;

public class SecurityTest {
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
      System.out.println("FAIL " + name + ": " + t);
    }
    System.out.flush();
  }

  static void require(boolean cond, String message) {
    if (!cond) {
      throw new AssertionError(message);
    }
  }

  static String base;

  static Connection as(String user) throws SQLException {
    return DriverManager.getConnection(
        base + "&user=" + user + "&password=" + user + "pw");
  }

  static Connection withToken(String token) throws SQLException {
    return DriverManager.getConnection(base + "&token=" + token);
  }

  static long count(Connection c, String sql) throws SQLException {
    try (Statement s = c.createStatement(); ResultSet r = s.executeQuery(sql)) {
      require(r.next(), "no row: " + sql);
      return r.getLong(1);
    }
  }

  /** The statement fails with a message containing `says`. */
  static void refused(Connection c, String sql, String says) throws SQLException {
    try (Statement s = c.createStatement()) {
      try (ResultSet r = s.executeQuery(sql)) {
        while (r.next()) {}
      }
      throw new AssertionError("ran: " + sql);
    } catch (SQLException e) {
      StringBuilder all = new StringBuilder(String.valueOf(e.getMessage()));
      for (Throwable t = e.getCause(); t != null; t = t.getCause()) {
        all.append(" | ").append(t.getMessage());
      }
      require(all.toString().contains(says), sql + ": " + all);
    }
  }

  static List<String> tables(Connection c) throws SQLException {
    TreeSet<String> out = new TreeSet<>();
    DatabaseMetaData meta = c.getMetaData();
    try (ResultSet r = meta.getTables("local", null, "%", null)) {
      while (r.next()) {
        String schema = r.getString("TABLE_SCHEM");
        if (!"information_schema".equals(schema)) {
          out.add(schema + "." + r.getString("TABLE_NAME"));
        }
      }
    }
    return new ArrayList<>(out);
  }

  public static void main(String[] args) throws Exception {
    String uri = System.getenv("ICEFLIGHT_URI");
    if (uri == null || uri.isEmpty()) {
      System.err.println("SecurityTest: ICEFLIGHT_URI is not set");
      System.exit(2);
    }
    URI u = URI.create(uri);
    base = "jdbc:arrow-flight-sql://" + u.getHost() + ":" + u.getPort() + "/?useEncryption=false";
    Path outside = Path.of(System.getenv("ICEFLIGHT_SECURITY_DIR"), "outside");
    Path jwt = Path.of(System.getenv("ICEFLIGHT_JWT_DIR"));

    check("an IDE's getTables lists only the tables a user may see", () -> {
      try (Connection bob = as("bob"); Connection carol = as("carol")) {
        require(tables(bob).equals(Arrays.asList("eng.events", "shared.notes")), "bob: " + tables(bob));
        require(tables(carol).equals(Arrays.asList("shared.notes")), "carol: " + tables(carol));
        try (ResultSet r = carol.getMetaData().getColumns("local", "alice", "private", "%")) {
          require(!r.next(), "carol sees the columns of alice.private");
        }
      }
    });

    check("reads and writes follow the rules", () -> {
      try (Connection bob = as("bob")) {
        require(count(bob, "SELECT count(*) FROM local.eng.events") == 2, "bob reads eng.events");
        refused(bob, "SELECT * FROM local.alice.private", "access denied");
        refused(bob, "DELETE FROM local.shared.notes", "DELETE privilege");
        try (PreparedStatement p = bob.prepareStatement("INSERT INTO local.shared.notes VALUES (?, ?)")) {
          p.setLong(1, 9);
          p.setString(2, "nine");
          p.addBatch();
          p.executeBatch();
          throw new AssertionError("the batch ran");
        } catch (SQLException e) {
          require(String.valueOf(e.getMessage()).contains("INSERT privilege")
              || String.valueOf(e.getCause()).contains("INSERT privilege"), "batch: " + e);
        }
        require(count(bob, "SELECT count(*) FROM local.shared.notes") == 2, "notes unchanged");
      }
    });

    check("the server's files are out of reach", () -> {
      try (Connection carol = as("carol")) {
        refused(carol, "COPY (SELECT 1 AS a) TO '" + outside + "/jdbc.csv' STORED AS CSV", "may not use");
        refused(carol, "SELECT * FROM read_csv('/etc/passwd')", "may not use");
        refused(carol, "SET datafusion.runtime.memory_limit = '100G'", "only admins may change");
      }
      require(!Files.exists(outside.resolve("jdbc.csv")), "a file was written outside the roots");
    });

    check("a bearer JWT logs in as its user", () -> {
      String token = Files.readString(jwt.resolve("alice.jwt")).trim();
      try (Connection alice = withToken(token)) {
        require(count(alice, "SELECT count(*) FROM local.alice.private") == 2, "alice reads her table");
        refused(alice, "SELECT * FROM local.eng.events", "access denied");
      }
      String expired = Files.readString(jwt.resolve("expired.jwt")).trim();
      try (Connection c = withToken(expired)) {
        count(c, "SELECT 1");
        throw new AssertionError("an expired token logged in");
      } catch (SQLException e) {
        String all = String.valueOf(e) + " " + e.getCause();
        require(all.contains("expired") || all.contains("UNAUTHENTICATED"), "expired: " + all);
      }
    });

    System.out.println(passed + " passed, " + failed + " failed");
    System.exit(failed == 0 ? 0 : 1);
  }
}
