package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/latency"
	"github.com/tandemdb/tandem/report"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// A capture replayed as 4 shard processes with one start instant, merged
// by tandem report, counts what one unsharded replay counts; every session
// is in exactly one shard; merged percentiles are those of the merged
// histograms.
func TestShardedReplayMerges(t *testing.T) {
	t.Parallel()
	srv := sandboxtest.Server(t, "innodb")
	_, a := srv.FreshDB(t)
	dir := t.TempDir()
	capDir := filepath.Join(dir, "cap")
	if _, stderr, code := run(t, nil, "synth", "oltp_read_only", "--out", capDir, "--tables", "2", "--table-size", "1000", "--threads", "12", "--events", "600"); code != 0 {
		t.Fatalf("synth: %s", stderr)
	}
	if _, stderr, code := run(t, nil, "prepare", "--tables", "2", "--table-size", "1000", "--target", "a="+a); code != 0 {
		t.Fatalf("prepare: %s", stderr)
	}
	// One unsharded replay.
	out, stderr, code := run(t, nil, "replay", capDir, "--speed", "0", "--run", filepath.Join(dir, "whole"), "--json", "--metrics-addr", "off", "--target", "a="+a)
	if code != 0 {
		t.Fatalf("replay: %s", stderr)
	}
	var whole report.Report
	if err := json.Unmarshal([]byte(out), &whole); err != nil {
		t.Fatal(err)
	}
	// Four shards, one start instant, one run id, at once, each given the
	// capture packed (they unpack it, concurrently, once).
	archive := filepath.Join(dir, "cap.tar.zst")
	if out, stderr, code := run(t, nil, "pack", capDir, "-o", archive); code != 0 || !strings.Contains(out, "tandem pack: "+archive) {
		t.Fatalf("pack: %s %s", out, stderr)
	}
	unpack := t.TempDir()
	start := time.Now().Add(4 * time.Second).UTC().Format(time.RFC3339)
	var dirs []string
	var cmds []*exec.Cmd
	var errs []*strings.Builder
	for i := range 4 {
		d := filepath.Join(dir, fmt.Sprintf("shard-%d", i))
		dirs = append(dirs, d)
		c := exec.Command(tandemBin, "replay", archive, "--unpack-dir", unpack, "--speed", "0", "--run", d, "--run-id", "sharded", "--shard", fmt.Sprintf("%d/4", i),
			"--start-at", start, "--metrics-addr", "off", "--target", "a="+a)
		var eb strings.Builder
		c.Stderr = &eb
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, errs = append(cmds, c), append(errs, &eb)
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("shard %d: %v\n%s", i, err, errs[i])
		}
	}
	out, stderr, code = run(t, nil, append([]string{"report", "--format", "json"}, dirs...)...)
	if code != 0 {
		t.Fatalf("report: %s", stderr)
	}
	var merged report.Report
	if err := json.Unmarshal([]byte(out), &merged); err != nil {
		t.Fatal(err)
	}
	// A packed capture is named as the user gave it, not by its unpacked
	// copy in a temporary directory (#29 item 15).
	if merged.Capture != archive || !slices.ContainsFunc(merged.Notes, func(n string) bool {
		return strings.HasPrefix(n, "the capture "+archive+" was replayed from its unpacked copy in "+unpack)
	}) {
		t.Errorf("a packed capture's run names %q, notes %q; want %s and where it was unpacked", merged.Capture, merged.Notes, archive)
	}
	w, m := whole.Points[0].Targets[0], merged.Points[0].Targets[0]
	if len(merged.Shards) != 4 || merged.RunID != "sharded" {
		t.Errorf("merged shards %v, run id %q", merged.Shards, merged.RunID)
	}
	if m.Reads != w.Reads || m.Writes != w.Writes || m.Other != w.Other || m.Transactions != w.Transactions || m.Errors != w.Errors || m.Connections != w.Connections {
		t.Errorf("merged %d/%d/%d statements, %d trx, %d errors, %d connections; unsharded %d/%d/%d, %d, %d, %d",
			m.Reads, m.Writes, m.Other, m.Transactions, m.Errors, m.Connections, w.Reads, w.Writes, w.Other, w.Transactions, w.Errors, w.Connections)
	}
	if w.Reads != 600*14 {
		t.Errorf("unsharded: %d reads, want 8400", w.Reads)
	}
	// Each session in exactly one shard, every session in one.
	owner := map[uint64]int{}
	var hand latency.Histogram
	for i, d := range dirs {
		rr, err := store.OpenRun(d)
		if err != nil {
			t.Fatal(err)
		}
		for o, err := range rr.Outcomes(0, 0) {
			if err != nil {
				t.Fatal(err)
			}
			if j, ok := owner[o.Session]; ok && j != i {
				t.Errorf("session %d in shards %d and %d", o.Session, j, i)
			}
			owner[o.Session] = i
		}
		h, ok, err := rr.Histogram(0, 0, store.SeriesService, "")
		if err != nil || !ok {
			t.Fatalf("shard %d histogram: %v %v", i, ok, err)
		}
		hand.Merge(h)
		rr.Close()
	}
	if len(owner) != 12 {
		t.Errorf("%d sessions across the shards, want 12", len(owner))
	}
	if want := float64(hand.Quantile(0.95)) / 1e6; m.Latency.P95 != want || m.Latency.Count != int64(hand.Count()) {
		t.Errorf("merged p95 %v over %d, histograms merged by hand %v over %d", m.Latency.P95, m.Latency.Count, want, hand.Count())
	}
	if ents, _ := os.ReadDir(unpack); len(ents) != 1 {
		t.Errorf("unpacked %d times, want once: %v", len(ents), ents)
	}
	// Shards need one run id; another run is refused in text and json.
	if _, stderr, code := run(t, nil, "report", dirs[0], filepath.Join(dir, "whole")); code != 1 || !strings.Contains(stderr, "runs of different run ids") {
		t.Errorf("mixing runs: exit %d, %s", code, stderr)
	}
	if _, stderr, code := run(t, nil, "replay", capDir, "--shard", "1/4", "--target", "a="+a, "--metrics-addr", "off"); code != 1 || !strings.Contains(stderr, "same --run-id") {
		t.Errorf("a shard without --run-id: exit %d, %s", code, stderr)
	}
	if _, stderr, code := run(t, nil, "replay", capDir, "--shard", "1/4", "--run-id", "x", "--order", "capture", "--target", "a="+a, "--metrics-addr", "off"); code != 1 || !strings.Contains(stderr, "--order capture with 4 shards") {
		t.Errorf("--order capture with shards: exit %d, %s", code, stderr)
	}
	if _, stderr, code := run(t, []string{"JOB_COMPLETION_INDEX=7"}, "replay", capDir, "--shards", "4", "--run-id", "x", "--target", "a="+a, "--metrics-addr", "off"); code != 1 || !strings.Contains(stderr, `$JOB_COMPLETION_INDEX is "7"`) {
		t.Errorf("index out of range: exit %d, %s", code, stderr)
	}
	past := time.Now().Add(-2 * time.Minute).UTC().Format(time.RFC3339)
	if _, stderr, code := run(t, nil, "replay", capDir, "--start-at", past, "--target", "a="+a, "--metrics-addr", "off"); code != 1 || !strings.Contains(stderr, "in the past (more than a minute)") {
		t.Errorf("--start-at in the past: exit %d, %s", code, stderr)
	}
}
