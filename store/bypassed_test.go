package store

import "testing"

// The session that carries the writes that bypassed the proxy is named in
// messages, not shown as its id (4611686018427387904).
func TestSessionNameNamesTheBypassedWrites(t *testing.T) {
	for id, want := range map[uint64]string{
		12:                      "session 12",
		BypassedSessionBase - 1: "session 4611686018427387903",
		BypassedSessionBase:     "the writes that bypassed the proxy (from the binary log)",
	} {
		if got := SessionName(id); got != want {
			t.Errorf("SessionName(%d) = %q, want %q", id, got, want)
		}
	}
}
