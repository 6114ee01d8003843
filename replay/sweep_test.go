package replay

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/gtid"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/targets"
)

// A sweep of a capture that knows its start point checks the targets are
// there, as replay does, and marks them replayed onto: before, it did
// neither, and a replay after a sweep found the target "at the capture's
// start point" though the sweep had written to it.
func TestSweepChecksAndMarksTheStartPoint(t *testing.T) {
	srv := sandboxtest.Server(t, "rocksdb") // its own server: the mark is the server's
	root, dsn := srv.FreshDB(t)
	t.Cleanup(func() { root.Exec("DROP DATABASE IF EXISTS `" + gtid.MarkerDB + "`") })
	ctx := context.Background()
	flavor, pos, _, err := gtid.Applied(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	capture := func(start string) string {
		dir := filepath.Join(t.TempDir(), "cap")
		w, err := store.Create(dir, store.WriterOptions{NoSync: true, Start: &store.Position{Flavor: flavor, GTID: start}})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		for _, r := range []store.Record{
			{Session: 1, Start: now, Kind: store.KindConnect, User: "app"},
			{Session: 1, Start: now.Add(time.Millisecond), Kind: store.KindQuery, SQL: "SELECT 1", Resp: store.Response{Kind: store.RespResultSet, Columns: 1, Rows: 1}},
			{Session: 1, Start: now.Add(2 * time.Millisecond), Kind: store.KindQuit},
		} {
			if _, err := w.Append(&r); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	target := tgt(t, "a", dsn, "")
	sweep := func(capDir string, mod func(*Config)) (Result, error) {
		cfg := Config{Capture: capDir, RunDir: filepath.Join(t.TempDir(), "run"), Targets: []targets.Target{target}, Loop: 2}
		if mod != nil {
			mod(&cfg)
		}
		return RunSweep(ctx, cfg, Sweep{Threads: []int{1, 2}}, nil)
	}
	// A start point the target is not at: refused, as replay refuses it.
	if _, err := sweep(capture(pos+",9-9-9"), nil); err == nil || !strings.Contains(err.Error(), "do not hold the rows the primary held") {
		t.Fatalf("a sweep onto a target not at the start point: %v", err)
	}
	capDir := capture(pos)
	res, err := sweep(capDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep := wrapReport(loadRun(t, res, nil))
	if notes := strings.Join(rep.Notes, " "); !strings.Contains(notes, "from the sweep's second point on") {
		t.Errorf("notes %q", rep.Notes)
	}
	// The sweep wrote to it: a replay now refuses it.
	_, err = Run(ctx, Config{Capture: capDir, RunDir: filepath.Join(t.TempDir(), "again"), Targets: []targets.Target{target}}, nil)
	if err == nil || !strings.Contains(err.Error(), "was replayed onto before") {
		t.Errorf("a replay after the sweep: %v", err)
	}
	var n int
	if err := root.QueryRow("SELECT COUNT(*) FROM `" + gtid.MarkerDB + "`.replays").Scan(&n); err != nil || n != 1 {
		t.Errorf("marks %d %v, want the sweep's one", n, err)
	}
}
