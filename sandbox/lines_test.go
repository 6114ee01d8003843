package sandbox

import "testing"

func TestInstallErrorsKeepsTheServersErrors(t *testing.T) {
	out := `Installing MariaDB/MySQL system tables in '/tmp/x/data' ...
2026-11-30 15:00:00 0 [ERROR] InnoDB: io_setup() failed with EAGAIN
2026-11-30 15:00:00 0 [ERROR] Aborting

Installation of system tables failed!  Examine the logs in
/tmp/x/data for more information.
` + "footer line\n" + "footer line\n" + "footer line\n" + "footer line\n" + "footer line\n" + "footer line\n" + "footer line\n" + "footer line\n" + "footer line\n" + "footer line\n" + "footer line\n" + "footer line\n"
	want := "  2026-11-30 15:00:00 0 [ERROR] InnoDB: io_setup() failed with EAGAIN\n  2026-11-30 15:00:00 0 [ERROR] Aborting"
	if got := installErrors(out); got != want {
		t.Errorf("installErrors = %q, want %q", got, want)
	}
	if got := installErrors("a\nb\n"); got != "  a\n  b" {
		t.Errorf("without [ERROR] lines: %q, want the last lines", got)
	}
}
