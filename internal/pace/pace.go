// Package pace waits until an instant, as precisely as the kernel allows.
//
// Go's timers wake up to a millisecond late on Linux: the runtime's poller
// waits in whole milliseconds, so a 300 µs sleep takes about 1 ms (measured on
// this project's machines: time.Sleep late by 0.6–1.0 ms at p50, nanosleep by
// about 60 µs, and a few µs with the thread's timer slack at 1 µs). A replay
// that paces its sends with Go timers therefore sends every statement due in
// the same millisecond together: bursts the capture did not have, which raise
// the targets' latencies. SleepUntil sleeps the bulk of a wait on a Go timer
// (cancellable) and its last stretch in the kernel, on the calling goroutine's
// thread, as a C client paced by nanosleep would.
package pace

import (
	"context"
	"time"

	"golang.org/x/sys/unix"
)

// coarse is how early a Go timer may be asked to fire: more than its
// lateness, so that the kernel sleeps the rest.
const coarse = 2 * time.Millisecond

// SleepUntil returns at t (a few µs after it), or as soon as ctx ends while a
// Go timer runs (the last stretch, at most 2 ms, is not interrupted).
func SleepUntil(ctx context.Context, t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	if d > coarse {
		tm := time.NewTimer(d - coarse)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			return
		}
	}
	kernelSleep(t)
}

// kernelSleep sleeps until t in the kernel, blocking the calling thread (the Go
// runtime hands its processor to other goroutines meanwhile). The thread's
// timer slack is set to 1 µs first: by default the kernel may wake a sleeper
// up to 50 µs late, to batch wakeups. The slack stays so on that thread; it
// only makes the thread's own timed waits precise.
func kernelSleep(t time.Time) {
	if time.Until(t) <= 0 {
		return
	}
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1000, 0, 0, 0) // best effort: without it, tens of µs late
	for {
		d := time.Until(t)
		if d <= 0 {
			return
		}
		ts := unix.NsecToTimespec(int64(d))
		_ = unix.Nanosleep(&ts, nil) // EINTR: the loop sleeps what is left
	}
}
