package report

import (
	"fmt"
	"maps"
	"slices"

	"github.com/tandemdb/tandem/latency"
	"github.com/tandemdb/tandem/store"
)

// LoadMerged reads the shard runs in dirs (tandem replay --shard i/n, one
// run id) and merges them into one report: counts add up, histograms merge
// (so percentiles are those of all statements, never an average of the
// shards'), interval series add up instant by instant (the shards share
// one start instant), divergences and their samples join. The end state
// and footprint are the shard's that ended last (the tables as they were
// once every shard was done). Runs of different ids are refused.
func LoadMerged(dirs []string) (*Report, error) {
	if len(dirs) == 1 {
		return Load(dirs[0])
	}
	var reps []*Report
	for _, d := range dirs {
		r, err := Load(d)
		if err != nil {
			return nil, err
		}
		reps = append(reps, r)
	}
	return Merge(reps)
}

// Merge merges shard reports of one run (see LoadMerged).
func Merge(reps []*Report) (*Report, error) {
	if len(reps) == 0 {
		return nil, fmt.Errorf("report: nothing to merge")
	}
	first := reps[0]
	seen := map[int]string{}
	for _, r := range reps {
		if r.RunID != first.RunID || r.Command != first.Command {
			return nil, fmt.Errorf("%w: %s (%s) and %s (%s); give the shard runs of one run, or --format html|csv to show different runs side by side",
				ErrMixedRuns, first.RunDirs[0], first.RunID, r.RunDirs[0], r.RunID)
		}
		if len(r.Shards) != 1 {
			return nil, fmt.Errorf("report: %s is not a shard run (tandem replay --shard i/n); several runs side by side: --format html or csv", r.RunDirs[0])
		}
		s := r.Shards[0]
		if prev, dup := seen[s.Index]; dup {
			return nil, fmt.Errorf("report: %s and %s are both shard %d/%d", prev, r.RunDirs[0], s.Index, s.Count)
		}
		seen[s.Index] = r.RunDirs[0]
		if s.Count != first.Shards[0].Count {
			return nil, fmt.Errorf("report: shard counts differ: %s is of %d, %s of %d", first.RunDirs[0], first.Shards[0].Count, r.RunDirs[0], s.Count)
		}
	}
	out := &Report{RunID: first.RunID, Command: first.Command, Capture: first.Capture, CaptureSource: first.CaptureSource,
		Started: first.Started, Baseline: first.Baseline, Settings: first.Settings, Finished: true,
		CaptureSessions: first.CaptureSessions} // the whole capture's, the same in every shard
	if n := first.Shards[0].Count; len(reps) < n {
		out.Notes = append(out.Notes, fmt.Sprintf("only %d of the run's %d shards are merged here", len(reps), n))
	}
	last := map[string]float64{} // target → elapsed of the shard whose end state is kept
	for _, r := range reps {
		out.RunDirs = append(out.RunDirs, r.RunDirs...)
		out.Shards = append(out.Shards, r.Shards...)
		out.Elapsed = max(out.Elapsed, r.Elapsed)
		out.Finished = out.Finished && r.Finished
		for _, n := range r.Notes {
			if !slices.Contains(out.Notes, n) {
				out.Notes = append(out.Notes, n)
			}
		}
		for pi, pt := range r.Points {
			if pi >= len(out.Points) {
				out.Points = append(out.Points, Point{Point: pt.Point})
			}
			op := &out.Points[pi]
			op.Elapsed = max(op.Elapsed, pt.Elapsed)
			for _, t := range pt.Targets {
				k := slices.IndexFunc(op.Targets, func(x Target) bool { return x.Name == t.Name })
				if k < 0 {
					op.Targets = append(op.Targets, Target{RunTarget: t.RunTarget, hist: map[store.Series]*latency.Histogram{}, digests: map[string]*latency.Histogram{}})
					k = len(op.Targets) - 1
					op.Targets[k].Target = t.Target
				}
				mergeTarget(&op.Targets[k], &t, last)
			}
		}
	}
	slices.SortFunc(out.Shards, func(a, b store.Shard) int { return a.Index - b.Index })
	digests := map[string]store.DigestInfo{}
	for _, r := range reps {
		maps.Copy(digests, r.digestInfo)
	}
	out.digestInfo = digests
	out.finish(digests)
	return out, nil
}

// mergeTarget adds t (one shard's) into o.
func mergeTarget(o, t *Target, last map[string]float64) {
	r, x := &o.TargetResult, &t.TargetResult
	r.Elapsed = max(r.Elapsed, x.Elapsed)
	r.Transactions += x.Transactions
	r.Reads += x.Reads
	r.Writes += x.Writes
	r.Other += x.Other
	r.Errors += x.Errors
	r.Deadlocks += x.Deadlocks
	r.Retries += x.Retries
	r.RetriesSucceeded += x.RetriesSucceeded
	r.CaptureRollbacks += x.CaptureRollbacks
	r.Connections += x.Connections
	r.ConnectFailures += x.ConnectFailures
	r.Skipped += x.Skipped
	r.OrderWaits += x.OrderWaits
	r.OrderReruns += x.OrderReruns
	r.OrderReleased += x.OrderReleased
	r.PinnedSessions += x.PinnedSessions
	r.Reexecuted += x.Reexecuted
	r.FailedTransactions += x.FailedTransactions
	r.ErrorCodes = addCounts(r.ErrorCodes, x.ErrorCodes)
	r.SkippedBy = addCounts(r.SkippedBy, x.SkippedBy)
	r.FailedByCode = addCounts(r.FailedByCode, x.FailedByCode)
	r.Failures = append(r.Failures, x.Failures[:min(len(x.Failures), store.MaxFailures-len(r.Failures))]...)
	r.Reordered += x.Reordered
	r.Reorders = append(r.Reorders, x.Reorders[:min(len(x.Reorders), store.MaxFailures-len(r.Reorders))]...)
	if x.Failed != "" && r.Failed == "" {
		r.Failed = x.Failed
	}
	r.VsBaseline = mergeDivergences(r.VsBaseline, x.VsBaseline)
	r.VsCapture = mergeDivergences(r.VsCapture, x.VsCapture)
	if x.Elapsed >= last[o.Name] {
		last[o.Name] = x.Elapsed
		r.EndState, r.Footprint, r.FootprintError = x.EndState, x.Footprint, x.FootprintError
		r.Created, r.CreatedDropped = x.Created, x.CreatedDropped
	}
	if r.FootprintBefore == nil {
		r.FootprintBefore = x.FootprintBefore
	}
	for s, h := range t.hist {
		if o.hist[s] == nil {
			o.hist[s] = &latency.Histogram{}
		}
		o.hist[s].Merge(h)
	}
	for id, h := range t.digests {
		if o.digests[id] == nil {
			o.digests[id] = &latency.Histogram{}
		}
		o.digests[id].Merge(h)
	}
	for i, iv := range t.intervals {
		if i >= len(o.intervals) {
			o.intervals = append(o.intervals, store.Interval{Start: iv.Start, Length: iv.Length})
		}
		m := &o.intervals[i]
		m.Transactions += iv.Transactions
		m.Reads += iv.Reads
		m.Writes += iv.Writes
		m.Other += iv.Other
		m.Errors += iv.Errors
		m.Deadlocks += iv.Deadlocks
		m.Retries += iv.Retries
		m.Threads += iv.Threads
		m.Length = max(m.Length, iv.Length)
		m.Latency.Merge(&iv.Latency)
	}
}

func addCounts(a, b map[string]int64) map[string]int64 {
	if len(b) == 0 {
		return a
	}
	if a == nil {
		a = map[string]int64{}
	}
	for k, v := range b {
		a[k] += v
	}
	return a
}

// mergeDivergences adds b into a (either may be nil).
func mergeDivergences(a, b *store.Divergences) *store.Divergences {
	if b == nil {
		return a
	}
	if a == nil {
		a = &store.Divergences{}
	}
	a.Compared += b.Compared
	a.Nondeterministic += b.Nondeterministic
	a.Ambiguous += b.Ambiguous
	a.Skipped += b.Skipped
	a.Unavailable += b.Unavailable
	a.Missing += b.Missing
	a.Extra += b.Extra
	a.ByClass = addCounts(a.ByClass, b.ByClass)
	a.AmbiguousBy = addCounts(a.AmbiguousBy, b.AmbiguousBy)
	a.Samples = append(a.Samples, b.Samples...)
	return a
}
