package gtid

import (
	"strings"
	"testing"
)

func TestDumpPosition(t *testing.T) {
	for _, c := range []struct{ dump, flavor, pos string }{
		{"-- MariaDB dump 10.19\nCREATE TABLE t (a int);\nINSERT INTO t VALUES (1);\n-- Preferably use GTID to start replication from GTID position:\n\n-- SET GLOBAL gtid_slave_pos='0-1-4658';\n", MariaDB, "0-1-4658"},
		{"/*!40101 SET NAMES utf8mb4 */;\nSET GLOBAL gtid_slave_pos='0-1-8,1-2-3';\n", MariaDB, "0-1-8,1-2-3"},
		{"SET @@GLOBAL.GTID_PURGED=/*!80000 '+'*/ '3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5';\n", MySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"},
	} {
		f, p, err := DumpPosition(strings.NewReader(c.dump))
		if err != nil || f != c.flavor || p != c.pos {
			t.Errorf("DumpPosition(%q) = %s %q %v, want %s %q", c.dump, f, p, err, c.flavor, c.pos)
		}
	}
	if _, _, err := DumpPosition(strings.NewReader("-- dump\nCREATE TABLE t (a int);\nINSERT INTO t VALUES (1);\n-- CHANGE MASTER TO MASTER_LOG_FILE='b.000001', MASTER_LOG_POS=4;\n")); err == nil || !strings.Contains(err.Error(), "--gtid --master-data") {
		t.Errorf("a dump without its position: %v, want an error naming --gtid --master-data", err)
	}
}
