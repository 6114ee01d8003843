package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/tandemdb/tandem/replay"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// replayProgress returns a replay.Config.Progress that draws a bar with an
// ETA per point on w, or nil when w is not a terminal or interval lines
// were asked for (they are the progress then).
func replayProgress(w io.Writer, intervalLines bool) func(replay.Progress) {
	if !isTerminal(w) || intervalLines {
		return nil
	}
	var bar *progressbar.ProgressBar
	var point string
	return func(p replay.Progress) {
		if bar == nil || p.Point != point {
			if bar != nil {
				bar.Finish()
			}
			point = p.Point
			// Records handed out of the capture, counted; or, under
			// --duration, the time: a percentage and elapsed:left, no
			// count of milliseconds.
			desc, count := point+" (records)", progressbar.OptionShowCount()
			if p.ByTime {
				desc = fmt.Sprintf("%s (--duration %v)", point, time.Duration(p.Total)*time.Millisecond)
				count = func(*progressbar.ProgressBar) {}
			}
			bar = progressbar.NewOptions64(p.Total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(desc),
				count, progressbar.OptionSetPredictTime(true), progressbar.OptionSetElapsedTime(true),
				progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish(), progressbar.OptionSetWidth(30))
		}
		bar.Set64(p.Done)
		if p.Finished {
			bar.Finish()
			bar = nil
		}
	}
}

// rowsProgress returns a prepare.Config.Progress that draws a bar with an
// ETA on w, or nil when w is not a terminal.
func rowsProgress(w io.Writer, desc string) func(done, total int64) {
	if !isTerminal(w) {
		return nil
	}
	var bar *progressbar.ProgressBar
	return func(done, total int64) {
		if bar == nil {
			bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(desc),
				progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(200*time.Millisecond),
				progressbar.OptionClearOnFinish(), progressbar.OptionSetWidth(30))
		}
		bar.Set64(done)
		if done >= total {
			bar.Finish()
		}
	}
}
