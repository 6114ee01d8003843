package main

import (
	"os"
	"runtime/debug"
)

// replayGCPercent is the Go collector's GOGC for the commands that replay
// (replay, sweep): the heap may grow to 1.5 times what is live instead of
// twice. A replay's live heap is small (about 30 MB at 64 sessions: the
// records read ahead, statistics) and a collection of it cheap, so the
// collector's goal, not what it holds, was most of the Go heap. Measured
// on this project's 2-core machine, 64-session read/write replays of
// 200,000 records, three alternating runs: peak RSS 117-124 MB against
// 137-143 MB with Go's default 100, CPU (user + system) 10.8-14.0 s
// against 12.4-14.1 s; 805,000 records: 140 against 161 MB.
const replayGCPercent = 50

// tuneReplayGC sets replayGCPercent, unless the user set GOGC (then Go
// uses theirs).
func tuneReplayGC() {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	debug.SetGCPercent(replayGCPercent)
}
