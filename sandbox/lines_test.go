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

// The server's own [ERROR] line is what a failed start says first; the
// closing "Aborting" is not one.
func TestServerError(t *testing.T) {
	tail := "  2026-12-06 20:04:20 0 [Note] InnoDB: Completed initialization of buffer pool\n" +
		"  2026-12-06 20:04:20 0 [ERROR] /usr/sbin/mariadbd: unknown variable 'bogus-opt=1'\n" +
		"  2026-12-06 20:04:20 0 [ERROR] Aborting\n"
	if got := serverError(tail); got != "/usr/sbin/mariadbd: unknown variable 'bogus-opt=1'" {
		t.Errorf("serverError = %q", got)
	}
	if got := serverError("  2026-12-06 20:04:20 0 [ERROR] Aborting\n"); got != "" {
		t.Errorf("serverError of Aborting alone = %q", got)
	}
}
