// Connects with exactly the JDBC URL a person copies from iceflight (the demo's banner), runs one
// query and closes the connection, failing on any exception: the check that the printed URL works
// as printed with the Flight SQL JDBC driver, close included.
//
//   ICEFLIGHT_JDBC_URL=jdbc:arrow-flight-sql://... [ICEFLIGHT_JDBC_QUERY="SELECT ..."] \
//     tests/flight/jdbc/run.sh ConnectUrl.java
//
// Prints the query's first column of the first row as "value: V"; exits 0 when connect, query and
// close all succeed, 1 otherwise, 2 on bad setup.

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;

public class ConnectUrl {
  public static void main(String[] args) {
    String url = System.getenv("ICEFLIGHT_JDBC_URL");
    if (url == null || url.isEmpty()) {
      System.out.println("FAIL setup: ICEFLIGHT_JDBC_URL is not set");
      System.exit(2);
    }
    String query = System.getenv().getOrDefault("ICEFLIGHT_JDBC_QUERY", "SELECT count(*) FROM lineitem");
    try {
      Connection conn = DriverManager.getConnection(url);
      try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery(query)) {
        if (!rs.next()) {
          throw new AssertionError("no row from " + query);
        }
        System.out.println("value: " + rs.getString(1));
      }
      conn.close();
      System.out.println("PASS connect, query and close");
      System.exit(0);
    } catch (Throwable t) {
      System.out.println("FAIL " + t);
      for (Throwable c = t.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
        System.out.println("    caused by: " + c);
      }
      System.exit(1);
    }
  }
}
