package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tandemdb/tandem/proxy"
)

// fakeProxy is proxy.Controls that answers what a test sets, behind the
// real admin interface.
type fakeProxy struct {
	mu       sync.Mutex
	startErr error
	stopErr  error
	started  []proxy.CaptureOptions
	start    proxy.CaptureState
	stop     proxy.CaptureState
	status   proxy.Status
}

func (f *fakeProxy) Start(_ context.Context, o proxy.CaptureOptions) (proxy.CaptureState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, o)
	st := f.start
	st.Dir = o.Dir
	return st, f.startErr
}

func (f *fakeProxy) Stop(context.Context) (proxy.CaptureState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stop, f.stopErr
}

func (f *fakeProxy) Status() proxy.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}

// adminServer serves f's controls with token; it returns the address for
// --proxy.
func adminServer(t *testing.T, f *fakeProxy, token string) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(proxy.AdminPrefix, proxy.AdminHandler(f, token))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// runInProcess runs tandem's command tree with args and returns stdout
// and the error main would print (after "tandem: ").
func runInProcess(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// captureClock fixes the commands' "today" at t.
func captureClock(t *testing.T, at time.Time) {
	old := now
	now = func() time.Time { return at }
	t.Cleanup(func() { now = old })
}

func TestCaptureStart(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 1, 0, time.Local)
	captureClock(t, t0.Add(time.Minute))
	f := &fakeProxy{start: proxy.CaptureState{Started: t0, Deadline: t0.Add(15 * time.Minute), MaxBytes: 1 << 30, Results: "checksum", OpenAtStart: 3, Waiting: 1}}
	addr := adminServer(t, f, "")
	wd, _ := os.Getwd()
	out, err := runInProcess(t, "capture", "start", "cap1", "--proxy", addr, "--duration", "15m", "--max-bytes", "1073741824", "--capture-results", "CHECKSUM")
	if err != nil {
		t.Fatal(err)
	}
	want := "tandem capture: capturing into " + filepath.Join(wd, "cap1") + " since 10:00:01 (stops after 15m0s or at 1.0 GiB on disk)\n" +
		"tandem capture: 3 open sessions join it at their next command (1 in a transaction that has written: when it ends)\n" +
		"tandem capture: see it with 'tandem capture status'; end it with 'tandem capture stop'\n"
	if out != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
	}
	// The proxy got the directory made absolute here, and the options.
	wantOpts := proxy.CaptureOptions{Dir: filepath.Join(wd, "cap1"), Duration: proxy.Duration(15 * time.Minute), MaxBytes: 1 << 30, Results: "checksum"}
	if len(f.started) != 1 || f.started[0] != wantOpts {
		t.Errorf("the proxy was asked %+v, want %+v", f.started, wantOpts)
	}

	// No limits, no open sessions; a start on another day shows its date.
	f.start = proxy.CaptureState{Started: t0.Add(-24 * time.Hour), Results: "summary"}
	out, err = runInProcess(t, "capture", "start", "/abs/cap2", "--proxy", addr)
	if err != nil {
		t.Fatal(err)
	}
	want = "tandem capture: capturing into /abs/cap2 since 2026-02-28 10:00:01 (until 'tandem capture stop')\n" +
		"tandem capture: see it with 'tandem capture status'; end it with 'tandem capture stop'\n"
	if out != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
	}
	if got := f.started[1]; got != (proxy.CaptureOptions{Dir: "/abs/cap2"}) {
		t.Errorf("options without flags: %+v", got)
	}
}

func TestCaptureStop(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 1, 0, time.Local)
	captureClock(t, t0.Add(time.Hour))
	f := &fakeProxy{stop: proxy.CaptureState{Dir: "/caps/a", Started: t0, Stopped: t0.Add(5*time.Minute + 2*time.Second), Reason: proxy.StopDuration,
		Results: "summary", Records: 12345, Dropped: 7, OpenAtStart: 8, Connected: 3, Waiting: 1, StartGTID: "0-1-100", EndGTID: "0-1-250"}}
	addr := adminServer(t, f, "")
	out, err := runInProcess(t, "capture", "stop", "--proxy", addr)
	if err != nil {
		t.Fatal(err)
	}
	want := `tandem capture: stopped capturing into /caps/a: its --duration ran out (10:00:01 to 10:05:03, 5m2s)
  records:  12345, 7 dropped (the disk fell behind)
  sessions: 8 open at its start, 3 connected during it, 1 still waiting (in a transaction that had written): not captured
  GTIDs:    start 0-1-100, end 0-1-250
tandem capture: see what it holds with 'tandem inspect /caps/a'
`
	if out != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
	}

	// A capture ended by a full disk says what failed.
	f.stop = proxy.CaptureState{Dir: "/caps/b", Started: t0, Stopped: t0.Add(time.Second), Reason: proxy.StopDiskFull, Err: "store: no space left on device", Records: 2}
	out, err = runInProcess(t, "capture", "stop", "--proxy", addr)
	if err != nil {
		t.Fatal(err)
	}
	want = `tandem capture: stopped capturing into /caps/b: the disk was about to fill, or failed (10:00:01 to 10:00:02, 1s)
  records:  2, none dropped
  sessions: 0 open at its start, 0 connected during it, 0 still waiting (in a transaction that had written): not captured
  error:    store: no space left on device
tandem capture: see what it holds with 'tandem inspect /caps/b'
`
	if out != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
	}
}

func TestCaptureStatus(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 1, 0, time.Local)
	captureClock(t, t0.Add(time.Minute))
	f := &fakeProxy{status: proxy.Status{Capturing: true, Sessions: 11,
		Current: &proxy.CaptureState{Dir: "/caps/b", Started: t0, Deadline: t0.Add(15 * time.Minute), Results: "summary", Records: 40, OpenAtStart: 2, Connected: 1, Waiting: 1},
		Last:    &proxy.CaptureState{Dir: "/caps/a", Started: t0.Add(-time.Hour), Stopped: t0.Add(-50 * time.Minute), Reason: proxy.StopRequested, Records: 9},
	}}
	addr := adminServer(t, f, "")
	out, err := runInProcess(t, "capture", "status", "--proxy", addr)
	if err != nil {
		t.Fatal(err)
	}
	want := `tandem capture: capturing into /caps/b since 10:00:01 (stops at 10:15:01)
  records:  40, none dropped
  sessions: 2 open at its start, 1 connected during it, 1 waiting for a transaction that has written to end
  results:  summary
the proxy relays 11 sessions
last capture: /caps/a, 09:00:01 to 09:10:01: stopped on request
  records:  9, none dropped
  sessions: 0 open at its start, 0 connected during it, 0 still waiting (in a transaction that had written): not captured
`
	if out != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
	}

	// --json is the proxy's status as it sent it.
	out, err = runInProcess(t, "capture", "status", "--json", "--proxy", addr)
	if err != nil {
		t.Fatal(err)
	}
	var got proxy.Status
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if !got.Capturing || got.Sessions != 11 || got.Current == nil || got.Current.Records != 40 || got.Last == nil || got.Last.Reason != proxy.StopRequested ||
		!strings.Contains(out, "\n  \"capturing\": true,\n") {
		t.Errorf("--json:\n%s", out)
	}

	f.status = proxy.Status{Sessions: 1}
	out, err = runInProcess(t, "capture", "status", "--proxy", addr)
	if want := "tandem capture: not capturing\nthe proxy relays 1 session\n"; err != nil || out != want {
		t.Errorf("not capturing: %q, %v; want %q", out, err, want)
	}
}

func TestCaptureErrors(t *testing.T) {
	f := &fakeProxy{}
	addr := adminServer(t, f, "")
	// An address nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()
	// A server that is not a proxy's admin interface (--admin=false).
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	plainAddr := plain.Listener.Addr().String()
	cases := []struct {
		name     string
		startErr error
		stopErr  error
		args     []string
		want     string
	}{
		{"already running", fmt.Errorf("%w: into /caps/a since 10:00:01; stop it first", proxy.ErrCaptureRunning), nil,
			[]string{"capture", "start", "/caps/b", "--proxy", addr}, "proxy: a capture is already running: into /caps/a since 10:00:01; stop it first"},
		{"directory refused", fmt.Errorf("%w: /caps/b already holds files; give a new directory", proxy.ErrCaptureDir), nil,
			[]string{"capture", "start", "/caps/b", "--proxy", addr}, "proxy: capture directory refused: /caps/b already holds files; give a new directory"},
		{"nothing to stop", nil, proxy.ErrNoCapture, []string{"capture", "stop", "--proxy", addr}, "proxy: no capture is running"},
		{"no proxy", nil, nil, []string{"capture", "status", "--proxy", refused},
			"no proxy answers at " + refused + ": the capture controls are served on tandem proxy's --metrics-addr (default 127.0.0.1:9470); give that address with --proxy ADDR, and check that the proxy runs (curl http://" + refused + "/capture/status)"},
		{"no admin interface", nil, nil, []string{"capture", "stop", "--proxy", plainAddr},
			plainAddr + " answers but serves no capture controls: start tandem proxy with --admin (the default), and off loopback with --admin-token-file; check that " + plainAddr + " is the proxy's --metrics-addr"},
		{"negative duration", nil, nil, []string{"capture", "start", "/caps/b", "--duration", "-1s", "--proxy", addr}, "--duration -1s must not be negative (0: until 'tandem capture stop')"},
		{"negative max-bytes", nil, nil, []string{"capture", "start", "/caps/b", "--max-bytes", "-5", "--proxy", addr}, "--max-bytes -5 must not be negative (0: the proxy's --capture-max-bytes)"},
		{"bad results", nil, nil, []string{"capture", "start", "/caps/b", "--capture-results", "rows", "--proxy", addr}, `--capture-results "rows": want summary or checksum`},
		{"no directory", nil, nil, []string{"capture", "start", "--proxy", addr}, "capture start takes one directory, got 0 arguments; see 'tandem capture start --help'"},
		{"bad proxy address", nil, nil, []string{"capture", "status", "--proxy", "db1"}, `--proxy "db1": want HOST:PORT, the proxy's --metrics-addr (default 127.0.0.1:9470)`},
		{"proxy as URL", nil, nil, []string{"capture", "status", "--proxy", "http://db1:9470"}, `--proxy "http://db1:9470": want HOST:PORT (the proxy's --metrics-addr), not a URL`},
		{"status takes no args", nil, nil, []string{"capture", "status", "x", "--proxy", addr}, `unexpected argument "x"; see 'tandem capture status --help'`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f.startErr, f.stopErr, f.started = c.startErr, c.stopErr, nil
			out, err := runInProcess(t, c.args...)
			if err == nil || err.Error() != c.want {
				t.Errorf("error %v\nwant  %s", err, c.want)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			// Flags checked here never reach the proxy.
			if c.startErr == nil && len(f.started) != 0 {
				t.Errorf("the proxy was asked to start %+v", f.started)
			}
		})
	}
}

func TestCaptureToken(t *testing.T) {
	const token = "a-token-of-24-characters"
	f := &fakeProxy{status: proxy.Status{Sessions: 2}}
	addr := adminServer(t, f, token)
	dir := t.TempDir()
	good := filepath.Join(dir, "token")
	os.WriteFile(good, []byte(token+"\n"), 0o600)
	wrong := filepath.Join(dir, "wrong")
	os.WriteFile(wrong, []byte("another-token-of-24-chars\n"), 0o600)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte(" \n"), 0o600)

	const unauthorized = "this proxy's capture controls need its admin token: pass --admin-token-file FILE (the file given to tandem proxy --admin-token-file)"
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"without", nil, unauthorized},
		{"wrong", []string{"--admin-token-file", wrong}, unauthorized},
		{"empty", []string{"--admin-token-file", empty}, "--admin-token-file " + empty + " is empty; it holds the token given to the proxy"},
		{"missing", []string{"--admin-token-file", filepath.Join(dir, "nope")}, "--admin-token-file: open " + filepath.Join(dir, "nope") + ": no such file or directory"},
	} {
		_, err := runInProcess(t, append([]string{"capture", "status", "--proxy", addr}, c.args...)...)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
	}
	out, err := runInProcess(t, "capture", "status", "--proxy", addr, "--admin-token-file", good)
	if want := "tandem capture: not capturing\nthe proxy relays 2 sessions\n"; err != nil || out != want {
		t.Errorf("with the token: %q, %v; want %q", out, err, want)
	}
}

// The help teaches what a runtime capture is and how it ends.
func TestCaptureHelp(t *testing.T) {
	out, err := runInProcess(t, "capture", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"sessions already open", "inside a transaction that has", "when that transaction ends",
		"'tandem capture stop'", "--duration", "--max-bytes", "disk is about to fill", "proxy shuts down",
		"--metrics-addr", "--admin-token-file", "Examples:", "tandem capture start ./capture --duration 15m",
		"--proxy ADDR", "start", "stop", "status",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("tandem capture --help lacks %q:\n%s", want, out)
		}
	}
	out, err = runInProcess(t, "capture", "start", "--help")
	if err != nil || !strings.Contains(out, "on the proxy's machine") || !strings.Contains(out, "--capture-root") {
		t.Errorf("tandem capture start --help (%v):\n%s", err, out)
	}
}
