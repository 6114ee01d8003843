// BulkBatch runs JDBC batches on MariaDB Connector/J, which sends a
// prepared statement's batch as one COM_STMT_BULK_EXECUTE when the server
// offers it (useBulkStmts), and prints what the application sees: each
// batch's update counts and the table's contents. Run with
//   java -cp /usr/share/java/mariadb-java-client.jar BulkBatch.java JDBC_URL
import java.sql.*;
import java.util.*;

public class BulkBatch {
    static String counts(int[] r) {
        TreeMap<Integer, Integer> m = new TreeMap<>();
        for (int c : r) m.merge(c, 1, Integer::sum);
        return r.length + " results " + m;
    }

    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0])) {
            try (Statement s = c.createStatement()) {
                s.execute("CREATE TABLE b (id INT PRIMARY KEY, v VARCHAR(20), n INT NULL, d INT NOT NULL DEFAULT 7)");
            }
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO b (id, v, n) VALUES (?, ?, ?)")) {
                for (int i = 1; i <= 1000; i++) {
                    ps.setInt(1, i);
                    ps.setString(2, "row " + i);
                    ps.setInt(3, i * 3);
                    ps.addBatch();
                }
                System.out.println("insert batch: " + counts(ps.executeBatch()));
                // NULLs among the values: the driver may send these one
                // by one; whatever it does, the proxy must do the same.
                for (int i = 1001; i <= 1100; i++) {
                    ps.setInt(1, i);
                    ps.setString(2, "row " + i);
                    if (i % 7 == 0) ps.setNull(3, Types.INTEGER); else ps.setInt(3, i * 3);
                    ps.addBatch();
                }
                System.out.println("insert batch with NULLs: " + counts(ps.executeBatch()));
            }
            try (PreparedStatement ps = c.prepareStatement("UPDATE b SET n = ? WHERE id = ?")) {
                for (int i = 1; i <= 100; i++) {
                    ps.setInt(1, -i);
                    ps.setInt(2, i * 5);
                    ps.addBatch();
                }
                System.out.println("update batch: " + counts(ps.executeBatch()));
            }
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO b (id, v, n) VALUES (?, ?, ?)")) {
                for (int i = 999; i <= 1001; i++) { // 999 is there: the batch fails
                    ps.setInt(1, i);
                    ps.setString(2, "dup " + i);
                    ps.setInt(3, 0);
                    ps.addBatch();
                }
                try {
                    ps.executeBatch();
                    System.out.println("duplicate batch: no error");
                } catch (BatchUpdateException e) {
                    System.out.println("duplicate batch: error " + e.getErrorCode());
                }
            }
            try (Statement s = c.createStatement();
                 ResultSet rs = s.executeQuery("SELECT COUNT(*), SUM(id), COUNT(n), SUM(n), SUM(d), MAX(id) FROM b")) {
                rs.next();
                System.out.println("table: " + rs.getLong(1) + " rows, ids " + rs.getLong(2) + ", n " + rs.getLong(3) + " / " + rs.getLong(4) + ", d " + rs.getLong(5) + ", max " + rs.getLong(6));
            }
        }
    }
}
