package report

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/store"
)

// writeSmallCapture writes two sessions: one using text queries, one a
// prepared statement executed three times, with one error and one masked
// statement.
// newCapture makes a capture to write, in a directory of the test's.
func newCapture(t *testing.T) (string, *store.Writer) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cap")
	w, err := store.Create(dir, store.WriterOptions{Source: "test", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return dir, w
}

func writeSmallCapture(t *testing.T) (string, time.Time) {
	t.Helper()
	dir, w := newCapture(t)
	t0 := time.Now().Truncate(time.Millisecond)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	recs := []store.Record{
		{Session: 1, Start: ms(0), Duration: time.Millisecond, Kind: store.KindConnect, User: "app", Schema: "sbtest", Resp: store.Response{Kind: store.RespOK}},
		{Session: 1, Start: ms(1), Duration: 2 * time.Millisecond, Kind: store.KindQuery, SQL: "SELECT c FROM sbtest1 WHERE id=1", Resp: store.Response{Kind: store.RespResultSet, Rows: 1}},
		{Session: 1, Start: ms(2), Duration: 4 * time.Millisecond, Kind: store.KindQuery, SQL: "SELECT c FROM sbtest1 WHERE id=2", Resp: store.Response{Kind: store.RespResultSet, Rows: 1}},
		{Session: 2, Start: ms(3), Duration: time.Millisecond, Kind: store.KindPrepare, SQL: "SELECT c FROM sbtest1 WHERE id=?", StmtID: 1, Resp: store.Response{Kind: store.RespOK, Params: 1}},
		{Session: 2, Start: ms(4), Duration: 3 * time.Millisecond, Kind: store.KindExecute, StmtID: 1, Params: []store.Value{{Type: store.TypeLong, Int: 3}}, Resp: store.Response{Kind: store.RespResultSet, Rows: 1}},
		{Session: 2, Start: ms(5), Duration: 3 * time.Millisecond, Kind: store.KindExecute, StmtID: 1, Params: []store.Value{{Type: store.TypeLong, Int: 4}}, Resp: store.Response{Kind: store.RespResultSet, Rows: 1}},
		{Session: 2, Start: ms(6), Duration: 3 * time.Millisecond, Kind: store.KindExecute, StmtID: 9, Resp: store.Response{Kind: store.RespError, ErrCode: 1243, SQLState: "HY000", Message: "Unknown prepared statement handler"}},
		{Session: 2, Start: ms(7), Kind: store.KindClose, StmtID: 1},
		{Session: 1, Start: ms(8), Duration: time.Millisecond, Kind: store.KindQuery, SQL: "INSERT INTO t VALUES (1)", Resp: store.Response{Kind: store.RespError, ErrCode: 1062, SQLState: "23000", Message: "Duplicate entry '1' for key 'PRIMARY'"}},
		{Session: 1, Start: ms(9), Duration: time.Millisecond, Kind: store.KindQuery, SQL: "SET PASSWORD = ?", Flags: store.FlagMasked, Resp: store.Response{Kind: store.RespOK}},
		{Session: 1, Start: ms(10), Duration: time.Millisecond, Kind: store.KindQuit},
	}
	for i := range recs {
		if _, err := w.Append(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, t0
}

func TestInspectCountsExactly(t *testing.T) {
	dir, t0 := writeSmallCapture(t)
	rep, err := Inspect(context.Background(), dir, InspectOptions{Top: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != 11 || rep.Sessions != 2 || !rep.Closed || rep.Source != "test" || rep.Masked != 1 {
		t.Errorf("records=%d sessions=%d closed=%v source=%q masked=%d", rep.Records, rep.Sessions, rep.Closed, rep.Source, rep.Masked)
	}
	if !rep.FirstStart.Equal(t0) || !rep.LastEnd.Equal(t0.Add(11*time.Millisecond)) || rep.SpanSeconds != 0.011 {
		t.Errorf("span %v → %v (%v s), want %v → +11ms", rep.FirstStart, rep.LastEnd, rep.SpanSeconds, t0)
	}
	wantKinds := "connect=1 query=4 prepare=1 execute=3 close=1 quit=1"
	var kinds []string
	for _, k := range rep.ByKind {
		kinds = append(kinds, k.Kind+"="+strconv.FormatUint(k.Count, 10))
	}
	if got := strings.Join(kinds, " "); got != wantKinds {
		t.Errorf("by kind = %s, want %s", got, wantKinds)
	}
	if rep.Responses != (ResponseCounts{OK: 3, ResultSet: 4, Error: 2, None: 2}) {
		t.Errorf("responses = %+v", rep.Responses)
	}
	if len(rep.ErrorCodes) != 2 || rep.ErrorCodes[0].Code != 1062 || rep.ErrorCodes[1].Code != 1243 || rep.ErrorCodes[0].Count != 1 {
		t.Errorf("error codes = %+v", rep.ErrorCodes)
	}
	// Text and prepared forms of the point select share one digest: 2 + 2.
	if rep.Digests != 4 || len(rep.TopDigests) != 2 {
		t.Fatalf("digests = %d, top = %+v", rep.Digests, rep.TopDigests)
	}
	top := rep.TopDigests[0]
	if top.Text != "select `c` from `sbtest1` where `id` = ?" || top.Count != 4 || top.Executes != 2 || top.AvgSeconds != 0.003 {
		t.Errorf("top digest = %+v; want the point select, 4 times, 2 executes, avg 3ms", top)
	}
	if rep.DiskBytes <= 0 || rep.BytesPerRec != float64(rep.DiskBytes)/11 {
		t.Errorf("disk %d bytes, %.1f per record", rep.DiskBytes, rep.BytesPerRec)
	}

	var buf bytes.Buffer
	if err := rep.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	// Only a masked secret is flagged: the line said "0 not replayable ()"
	// before it.
	for _, want := range []string{"11 in 2 sessions, 4 statement digests", "closed cleanly", "1062 (23000)", "execute", "select `c` from `sbtest1` where `id` = ?"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, buf.String())
		}
	}
	if !regexp.MustCompile(`\nflagged +1 with masked secrets\n`).MatchString(buf.String()) || strings.Contains(buf.String(), "not replayable") {
		t.Errorf("text report does not flag the one masked secret alone:\n%s", buf.String())
	}
}

// An empty capture has no first start nor last end: JSON leaves them out
// (it said 0001-01-01T00:00:00Z).
func TestInspectEmptyCaptureHasNoSpan(t *testing.T) {
	dir, w := newCapture(t)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Inspect(context.Background(), dir, InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "first_start") || strings.Contains(string(b), "last_end") || strings.Contains(string(b), "0001-01-01") {
		t.Errorf("JSON of an empty capture: %s", b)
	}
}

// Regression: executes of prepares recorded without a response (synthetic
// captures) were all reported as "prepared before the capture began".
func TestInspectPrepareWithoutResponse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cap")
	w, err := store.Create(dir, store.WriterOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	recs := []store.Record{
		{Session: 1, Start: now, Kind: store.KindPrepare, StmtID: 1, SQL: "SELECT c FROM sbtest1 WHERE id=?"},
		{Session: 1, Start: now, Kind: store.KindExecute, StmtID: 1, Params: []store.Value{{Type: store.TypeLong, Int: 1}}},
		{Session: 1, Start: now, Kind: store.KindPrepare, StmtID: 2, SQL: "SELEC oops", Resp: store.Response{Kind: store.RespError, ErrCode: 1064}},
		{Session: 1, Start: now, Kind: store.KindExecute, StmtID: 2, Resp: store.Response{Kind: store.RespError, ErrCode: 1243}},
	}
	for i := range recs {
		w.Append(&recs[i])
	}
	w.Close()
	rep, err := Inspect(context.Background(), dir, InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, d := range rep.TopDigests {
		got[d.Text] = d.Count
	}
	if got["select `c` from `sbtest1` where `id` = ?"] != 1 || got["(statement 2 prepared before the capture began)"] != 1 || len(got) != 2 {
		t.Fatalf("digests = %v", got)
	}
}

// Each not-replayable record is counted under why it is not replayable.
func TestInspectSaysWhyNotReplayable(t *testing.T) {
	dir, w := newCapture(t)
	now := time.Now()
	nr := store.FlagNotReplayable
	recs := []store.Record{
		{Session: 1, Start: now, Kind: store.KindQuery, SQL: "LOAD DATA LOCAL INFILE '/tmp/x' INTO TABLE t", Flags: nr},
		{Session: 1, Start: now, Kind: store.KindQuery, SQL: "INSERT INTO t VALUES ('aaaa", Flags: nr},
		{Session: 1, Start: now, Kind: store.KindLongData, Flags: nr | store.FlagTruncated},
		{Session: 1, Start: now, Kind: store.KindExecute, StmtID: 3, Flags: nr},
		{Session: 1, Start: now, Kind: store.KindOther, Flags: nr},
		{Session: 1, Start: now, Kind: store.KindQuery, SQL: "SELECT 1"},
	}
	for i := range recs {
		if _, err := w.Append(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	rep, err := Inspect(context.Background(), dir, InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"LOAD DATA LOCAL: the file was the client's": 1, "statement longer than --max-record-bytes (cut)": 1,
		"truncated at --max-record-bytes": 1, "parameter types unknown (bound before the capture began)": 1, "a command the proxy does not parse": 1}
	if rep.NotReplayable != 5 || len(rep.NotReplayableBy) != len(want) {
		t.Fatalf("%d not replayable: %v", rep.NotReplayable, rep.NotReplayableBy)
	}
	for k, n := range want {
		if rep.NotReplayableBy[k] != n {
			t.Errorf("%s: %d, want %d", k, rep.NotReplayableBy[k], n)
		}
	}
	var b bytes.Buffer
	rep.WriteText(&b)
	if !strings.Contains(b.String(), "5 not replayable (1 LOAD DATA LOCAL: the file was the client's; 1 a command the proxy does not parse;") {
		t.Errorf("text:\n%s", b.String())
	}
}

// A capture started and stopped on a running proxy: inspect says how its
// sessions began and ended, and counts the synthetic records apart from
// those clients sent (neither in the responses nor in the digests).
func TestInspectSessionsOpenAtStartAndStop(t *testing.T) {
	dir, w := newCapture(t)
	at := time.Now().Truncate(time.Millisecond)
	ms := func(n int) time.Time { return at.Add(time.Duration(n) * time.Millisecond) }
	syn, before, stop := store.FlagOpenAtStart, store.FlagBeforeStart, store.FlagOpenAtStop
	ok := store.Response{Kind: store.RespOK}
	recs := []store.Record{
		// Session 1: open at the start inside a transaction, open at the stop.
		{Session: 1, Start: at, Kind: store.KindConnect, Flags: syn, User: "app", Schema: "shop", Resp: ok},
		{Session: 1, Start: at, Kind: store.KindQuery, Flags: syn, SQL: "SET NAMES utf8mb4", Resp: ok},
		{Session: 1, Start: at, Kind: store.KindQuery, Flags: syn | before, SQL: "START TRANSACTION", Resp: ok},
		{Session: 1, Start: at, Kind: store.KindPrepare, Flags: syn, SQL: "SELECT c FROM t WHERE id=?", StmtID: 4, Resp: store.Response{Kind: store.RespOK, Params: 1}},
		// Session 2: open at the start, not in a transaction; quits.
		{Session: 2, Start: at, Kind: store.KindConnect, Flags: syn, User: "app", Schema: "shop", Resp: ok},
		{Session: 1, Start: ms(1), Duration: time.Millisecond, Kind: store.KindExecute, Flags: before, StmtID: 4, Params: []store.Value{{Type: store.TypeLong, Int: 1}}, Resp: store.Response{Kind: store.RespResultSet, Rows: 1}},
		{Session: 1, Start: ms(2), Duration: time.Millisecond, Kind: store.KindQuery, Flags: before, SQL: "COMMIT", Resp: ok},
		// Sessions 3 and 4 connect during the capture; 3 quits, 4 is open
		// at the stop.
		{Session: 3, Start: ms(3), Duration: time.Millisecond, Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 4, Start: ms(3), Duration: time.Millisecond, Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 3, Start: ms(4), Duration: time.Millisecond, Kind: store.KindQuery, SQL: "SELECT 1", Resp: store.Response{Kind: store.RespResultSet, Rows: 1}},
		{Session: 2, Start: ms(5), Kind: store.KindQuit},
		{Session: 3, Start: ms(6), Kind: store.KindQuit},
		{Session: 1, Start: ms(9), Kind: store.KindQuit, Flags: stop},
		{Session: 4, Start: ms(9), Kind: store.KindQuit, Flags: stop},
	}
	for i := range recs {
		if _, err := w.Append(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Inspect(context.Background(), dir, InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := store.CaptureSessions{OpenAtStart: 2, InTransaction: 1, Connected: 2, Ended: 2, OpenAtStop: 2}
	if rep.Records != 14 || rep.Sessions != 4 || rep.SessionsBy != want {
		t.Errorf("records %d, sessions %d %+v; want 14, 4 %+v", rep.Records, rep.Sessions, rep.SessionsBy, want)
	}
	kinds := func(ks []KindCount) string {
		var s []string
		for _, k := range ks {
			s = append(s, k.Kind+"="+strconv.FormatUint(k.Count, 10))
		}
		return strings.Join(s, " ")
	}
	if got, synGot := kinds(rep.ByKind), kinds(rep.SyntheticByKind); got != "connect=2 query=2 execute=1 quit=2" || synGot != "connect=2 query=2 prepare=1" || rep.SyntheticEnds != 2 {
		t.Errorf("by kind %s, synthetic %s and %d ends; want connect=2 query=2 execute=1 quit=2, connect=2 query=2 prepare=1 and 2", got, synGot, rep.SyntheticEnds)
	}
	// Responses and digests: the captured ones only (COMMIT, SELECT 1, the execute).
	if rep.Responses != (ResponseCounts{OK: 3, ResultSet: 2, None: 2}) || rep.Digests != 3 {
		t.Errorf("responses %+v, digests %d; want ok 3, result sets 2, none 2; 3 digests", rep.Responses, rep.Digests)
	}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"sessions began  2 connected during the capture, 2 open at its start (1 inside a transaction)\n",
		"sessions ended  2 quit or disconnected, 2 open at its stop\n",
		"  prepare  1    7.1%  synthetic (open at start)\n",
		"  quit     2   14.3%  synthetic (open at stop)\n",
	} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("text lacks %q:\n%s", line, b.String())
		}
	}
}
