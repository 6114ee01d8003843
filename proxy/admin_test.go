package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeControls records what the admin interface asks of it.
type fakeControls struct {
	startErr, stopErr error
	started           []CaptureOptions
	stops             int
	stopCtx           context.Context
	state             CaptureState
	status            Status
}

func (f *fakeControls) Start(ctx context.Context, o CaptureOptions) (CaptureState, error) {
	f.started = append(f.started, o)
	if f.startErr != nil {
		return CaptureState{}, f.startErr
	}
	st := f.state
	st.Dir = o.Dir
	return st, nil
}

func (f *fakeControls) Stop(ctx context.Context) (CaptureState, error) {
	f.stops++
	f.stopCtx = ctx
	if f.stopErr != nil {
		return CaptureState{}, f.stopErr
	}
	return f.state, nil
}

func (f *fakeControls) Status() Status { return f.status }

// serve sends one request to h and returns the status, the body and the
// response's headers.
func serve(h http.Handler, method, path, ctype, body string, hdr ...string) (int, string, http.Header) {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if ctype != "" {
		r.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String(), w.Header()
}

func TestAdminHandler(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 10, 0, 1, 0, time.UTC)
	f := &fakeControls{
		state:  CaptureState{Dir: "/caps/a", Started: t0, Results: "summary", Records: 7, OpenAtStart: 2},
		status: Status{Capturing: true, Sessions: 3},
	}
	h := AdminHandler(f, "")
	const jsonType = "application/json"
	cases := []struct {
		name, method, path, ctype, body string
		startErr, stopErr               error
		code                            int
		want                            string
	}{
		{"status", "GET", "/capture/status", "", "", nil, nil, 200, `{"capturing":true,"sessions":3}`},
		{"start", "POST", "/capture/start", jsonType, `{"dir":"/caps/b","duration":"15m","max_bytes":1000,"results":"checksum"}`, nil, nil, 200,
			`{"dir":"/caps/b","started":"2025-03-01T10:00:01Z","results":"summary","records":7,"dropped":0,"open_at_start":2,"connected":0,"waiting":0}`},
		{"start with charset", "POST", "/capture/start", "application/json; charset=utf-8", `{"dir":"/caps/c"}`, nil, nil, 200, `"dir":"/caps/c"`},
		{"stop", "POST", "/capture/stop", "", "", nil, nil, 200, `"dir":"/caps/a"`},
		{"start a second", "POST", "/capture/start", jsonType, `{"dir":"/x"}`, fmt.Errorf("%w (into /caps/a)", ErrCaptureRunning), nil, 409,
			`{"error":"proxy: a capture is already running (into /caps/a)"}`},
		{"stop none", "POST", "/capture/stop", "", "", nil, ErrNoCapture, 409, `{"error":"proxy: no capture is running"}`},
		{"bad dir", "POST", "/capture/start", jsonType, `{"dir":"/x"}`, fmt.Errorf("%w: /x already holds files", ErrCaptureDir), nil, 400, `already holds files`},
		{"bad options", "POST", "/capture/start", jsonType, `{"dir":"/x"}`, fmt.Errorf("%w: results", ErrCaptureOptions), nil, 400, `bad capture options`},
		{"other error", "POST", "/capture/stop", "", "", nil, errors.New("disk on fire"), 500, `{"error":"disk on fire"}`},
		{"form post", "POST", "/capture/start", "application/x-www-form-urlencoded", "dir=/x", nil, nil, 415, `Content-Type: application/json`},
		{"no content type", "POST", "/capture/start", "", `{"dir":"/x"}`, nil, nil, 415, `Content-Type: application/json`},
		{"unknown field", "POST", "/capture/start", jsonType, `{"dir":"/x","durration":"1m"}`, nil, nil, 400, `unknown field \"durration\"`},
		{"bad duration", "POST", "/capture/start", jsonType, `{"dir":"/x","duration":"soon"}`, nil, nil, 400, `capture options:`},
		{"empty body", "POST", "/capture/start", jsonType, ``, nil, nil, 400, `the body is empty`},
		{"two objects", "POST", "/capture/start", jsonType, `{"dir":"/x"} {"dir":"/y"}`, nil, nil, 400, `data after the JSON object`},
		{"huge body", "POST", "/capture/start", jsonType, `{"dir":"` + strings.Repeat("a", 70<<10) + `"}`, nil, nil, 413, `over 65536 bytes`},
		{"unknown path", "GET", "/capture/pause", "", "", nil, nil, 404, `no capture control at /capture/pause`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f.startErr, f.stopErr = c.startErr, c.stopErr
			f.started, f.stops = nil, 0
			code, body, hdr := serve(h, c.method, c.path, c.ctype, c.body)
			if code != c.code || !strings.Contains(body, c.want) {
				t.Errorf("%s %s: %d %s, want %d with %s", c.method, c.path, code, body, c.code, c.want)
			}
			if ct := hdr.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			// Only a well-formed start reaches the controls.
			wantStarts := 0
			if c.path == "/capture/start" && (c.code == 200 || c.startErr != nil) {
				wantStarts = 1
			}
			if len(f.started) != wantStarts {
				t.Errorf("Start called %d times, want %d", len(f.started), wantStarts)
			}
		})
	}
	// The options arrive as sent.
	f.startErr = nil
	f.started = nil
	serve(h, "POST", "/capture/start", jsonType, `{"dir":"/caps/b","duration":"1h30m","max_bytes":1000,"results":"checksum"}`)
	want := CaptureOptions{Dir: "/caps/b", Duration: Duration(90 * time.Minute), MaxBytes: 1000, Results: "checksum"}
	if len(f.started) != 1 || f.started[0] != want {
		t.Errorf("Start got %+v, want %+v", f.started, want)
	}
}

// Stop gets the request's context: a client that gives up ends the wait.
func TestAdminStopContext(t *testing.T) {
	f := &fakeControls{}
	h := AdminHandler(f, "")
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequest("POST", "/capture/stop", nil).WithContext(ctx)
	h.ServeHTTP(httptest.NewRecorder(), r)
	cancel()
	if f.stops != 1 || f.stopCtx == nil || f.stopCtx.Err() == nil {
		t.Errorf("Stop called %d times; its context did not end with the request's", f.stops)
	}
}

func TestAdminMethods(t *testing.T) {
	h := AdminHandler(&fakeControls{}, "")
	for _, c := range []struct{ method, path, allow string }{
		{"POST", "/capture/status", "GET"},
		{"GET", "/capture/start", "POST"},
		{"GET", "/capture/stop", "POST"},
		{"DELETE", "/capture/stop", "POST"},
	} {
		code, body, hdr := serve(h, c.method, c.path, "application/json", "{}")
		if code != 405 || hdr.Get("Allow") != c.allow || !strings.Contains(body, "use "+c.allow) {
			t.Errorf("%s %s: %d Allow=%q %s, want 405 Allow=%s", c.method, c.path, code, hdr.Get("Allow"), body, c.allow)
		}
	}
}

func TestAdminToken(t *testing.T) {
	const token = "0123456789abcdefXYZ"
	f := &fakeControls{status: Status{Sessions: 1}}
	h := AdminHandler(f, token)
	for _, c := range []struct {
		name, auth string
		code       int
	}{
		{"none", "", 401},
		{"wrong", "Bearer 0123456789abcdefXYz", 401},
		{"prefix", "Bearer 0123456789abcdef", 401},
		{"longer", "Bearer " + token + "x", 401},
		{"basic", "Basic " + token, 401},
		{"right", "Bearer " + token, 200},
	} {
		code, body, hdr := serve(h, "GET", "/capture/status", "", "", "Authorization", c.auth)
		if code != c.code {
			t.Errorf("%s: %d %s, want %d", c.name, code, body, c.code)
		}
		if code == 401 && (!strings.Contains(body, "--admin-token-file") || hdr.Get("WWW-Authenticate") == "") {
			t.Errorf("%s: 401 %s (WWW-Authenticate %q): want it to name --admin-token-file", c.name, body, hdr.Get("WWW-Authenticate"))
		}
	}
	// Nothing reaches the controls without the token.
	serve(h, "POST", "/capture/start", "application/json", `{"dir":"/x"}`)
	serve(h, "POST", "/capture/stop", "", "")
	if len(f.started) != 0 || f.stops != 0 {
		t.Errorf("without the token: %d starts, %d stops reached the controls", len(f.started), f.stops)
	}
}

func writeToken(t *testing.T, dir, name, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // (the umask applied)
		t.Fatal(err)
	}
	return p
}

func TestAdminFor(t *testing.T) {
	dir := t.TempDir()
	good := writeToken(t, dir, "good", "  s3cret-token-0123456789\n", 0o600)
	short := writeToken(t, dir, "short", "tooshort\n", 0o600)
	open := writeToken(t, dir, "open", "s3cret-token-0123456789", 0o644)
	group := writeToken(t, dir, "group", "s3cret-token-0123456789", 0o640)
	spaced := writeToken(t, dir, "spaced", "s3cret token 0123456789", 0o600)
	missing := filepath.Join(dir, "missing")
	cases := []struct {
		name, addr, file string
		enabled          bool
		token            string
		on               bool
		notice, err      string
	}{
		{"disabled", "127.0.0.1:9470", "", false, "", false, "", ""},
		{"disabled ignores the file", "0.0.0.0:9470", missing, false, "", false, "", ""},
		{"loopback", "127.0.0.1:9470", "", true, "", true, "", ""},
		{"loopback 127/8", "127.1.2.3:9470", "", true, "", true, "", ""},
		{"bare port", ":9470", "", true, "", true, "", ""},
		{"localhost", "localhost:9470", "", true, "", true, "", ""},
		{"ipv6 loopback", "[::1]:9470", "", true, "", true, "", ""},
		{"loopback with token", "127.0.0.1:9470", good, true, "s3cret-token-0123456789", true, "", ""},
		{"all interfaces without token", "0.0.0.0:9470", "", true, "", false, "is not loopback, and off loopback they need --admin-token-file", ""},
		{"host name without token", "metrics.example:9470", "", true, "", false, "--admin-token-file", ""},
		{"ipv6 any without token", "[::]:9470", "", true, "", false, "--admin-token-file", ""},
		{"all interfaces with token", "0.0.0.0:9470", good, true, "s3cret-token-0123456789", true, "", ""},
		{"metrics off", "off", "", true, "", false, "--metrics-addr is off", ""},
		{"short token", "0.0.0.0:9470", short, true, "", false, "", "--admin-token-file " + short + ": the token has 8 characters, want at least 16"},
		{"world-readable", "0.0.0.0:9470", open, true, "", false, "", "mode 0644); make it private: chmod 600 " + open},
		{"group-readable", "127.0.0.1:9470", group, true, "", false, "", "chmod 600"},
		{"spaces", "127.0.0.1:9470", spaced, true, "", false, "", "printable ASCII without spaces"},
		{"missing file", "127.0.0.1:9470", missing, true, "", false, "", "--admin-token-file: stat " + missing},
		{"bad address", "9470", "", true, "", false, "", `metrics address "9470"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			token, on, notice, err := AdminFor(c.addr, c.file, c.enabled)
			if token != c.token || on != c.on {
				t.Errorf("token %q on %v, want %q %v", token, on, c.token, c.on)
			}
			if (c.notice == "") != (notice == "") || !strings.Contains(notice, c.notice) {
				t.Errorf("notice %q, want %q", notice, c.notice)
			}
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Errorf("err %v, want %q", err, c.err)
			}
		})
	}
}

func TestCheckCaptureDir(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	mk := func(p string) string {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := mk(filepath.Join(root, "empty"))
	withFiles := mk(filepath.Join(root, "files"))
	os.WriteFile(filepath.Join(withFiles, "notes.txt"), nil, 0o644)
	capture := mk(filepath.Join(root, "cap"))
	os.WriteFile(filepath.Join(capture, "TANDEM"), nil, 0o644)
	pebble := mk(filepath.Join(root, "pebble"))
	os.WriteFile(filepath.Join(pebble, "CURRENT"), nil, 0o644)
	file := filepath.Join(root, "file")
	os.WriteFile(file, nil, 0o644)
	// A symbolic link inside the root to a directory outside it, and one
	// to a directory inside it.
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	mk(filepath.Join(root, "real"))
	if err := os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "alias")); err != nil {
		t.Fatal(err)
	}
	// The root itself through a symbolic link.
	rootLink := filepath.Join(outside, "rootlink")
	if err := os.Symlink(root, rootLink); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, root, dir, want, err string
	}{
		{"new, no root", "", filepath.Join(outside, "new"), filepath.Join(outside, "new"), ""},
		{"cleaned", "", outside + "/x/../new/", filepath.Join(outside, "new"), ""},
		{"empty dir", "", empty, empty, ""},
		{"no dir", "", " ", "", "no directory given"},
		{"holds files", "", withFiles, "", withFiles + " already holds files; give a new directory"},
		{"holds a capture", "", capture, "", capture + " already holds a capture; give a new directory"},
		{"holds a pebble store", "", pebble, "", "already holds a capture"},
		{"a file", "", file, "", file + " exists and is not a directory"},
		{"inside root", root, filepath.Join(root, "a", "b"), filepath.Join(root, "a", "b"), ""},
		{"empty inside root", root, empty, empty, ""},
		{"outside root", root, filepath.Join(outside, "new"), "", "is not inside the proxy's --capture-root " + root + "; give a directory under " + root},
		{"dot-dot out of root", root, root + "/../x", "", "is not inside the proxy's --capture-root"},
		{"the root itself", root, root, "", "is the proxy's --capture-root itself"},
		{"symlink out of root", root, filepath.Join(root, "escape", "new"), "", "once symbolic links are followed"},
		{"symlink itself out of root", root, filepath.Join(root, "escape"), "", "is not inside"},
		{"symlink within root", root, filepath.Join(root, "alias", "new"), filepath.Join(root, "alias", "new"), ""},
		{"root through a symlink", rootLink, filepath.Join(root, "new"), filepath.Join(root, "new"), ""},
		{"dir through the root's symlink", root, filepath.Join(rootLink, "new"), filepath.Join(rootLink, "new"), ""},
		{"root that does not exist yet", filepath.Join(outside, "later"), filepath.Join(outside, "later", "c"), filepath.Join(outside, "later", "c"), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := CheckCaptureDir(c.root, c.dir)
			if c.err == "" {
				if err != nil || got != c.want {
					t.Errorf("CheckCaptureDir(%q, %q) = %q, %v; want %q", c.root, c.dir, got, err, c.want)
				}
				return
			}
			if !errors.Is(err, ErrCaptureDir) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("CheckCaptureDir(%q, %q) = %q, %v; want ErrCaptureDir with %q", c.root, c.dir, got, err, c.err)
			}
		})
	}
	// A relative path is made absolute from the working directory.
	wd, _ := os.Getwd()
	if got, err := CheckCaptureDir("", "rel-capture"); err != nil || got != filepath.Join(wd, "rel-capture") {
		t.Errorf("relative: %q, %v", got, err)
	}
}
