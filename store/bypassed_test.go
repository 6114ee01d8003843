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

// The session that applies the bypassed writes (--apply-bypassed) is not
// one of the capture's sessions: a replay report said "1 connected during
// it" of a capture that inspect said had none.
func TestCaptureSessionsLeaveOutTheBypassedWrites(t *testing.T) {
	var c CaptureSessions
	for _, rec := range []Record{
		{Session: 1, Kind: KindConnect, Flags: FlagOpenAtStart},
		{Session: 1, Kind: KindQuery, Flags: FlagOpenAtStart | FlagBeforeStart},
		{Session: 2, Kind: KindConnect},
		{Session: BypassedSessionBase, Kind: KindConnect},
		{Session: BypassedSessionBase, Kind: KindQuery},
		{Session: BypassedSessionBase, Kind: KindQuit},
		{Session: 1, Kind: KindQuit, Flags: FlagOpenAtStop},
		{Session: 2, Kind: KindQuit},
	} {
		c.Add(&rec)
	}
	want := CaptureSessions{OpenAtStart: 1, InTransaction: 1, Connected: 1, Ended: 1, OpenAtStop: 1}
	if c != want {
		t.Errorf("counted %+v, want %+v", c, want)
	}
}
