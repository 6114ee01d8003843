package main

import (
	"os"
	"runtime/debug"
	"testing"
)

// Replay runs with the collector at 50 %, unless GOGC says otherwise.
func TestReplayGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	debug.SetGCPercent(100)
	tuneReplayGC()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set, the collector's percent is %d; want the user's (100 here)", got)
	}
	t.Run("unset", func(t *testing.T) {
		unsetenv(t, "GOGC")
		tuneReplayGC()
		if got := debug.SetGCPercent(100); got != replayGCPercent {
			t.Errorf("the collector's percent is %d; want %d", got, replayGCPercent)
		}
	})
}

// unsetenv removes key from the environment for the test, and puts back
// what it was after.
func unsetenv(t *testing.T, key string) {
	t.Helper()
	t.Setenv(key, "") // restores the old value when the test ends
	if err := os.Unsetenv(key); err != nil {
		t.Fatal(err)
	}
}
