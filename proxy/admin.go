package proxy

// The admin interface: the capture controls (Controls) over HTTP, served
// on the metrics address for tandem capture start|stop|status.
//
//	GET  /capture/status  200, the Status
//	POST /capture/start   a JSON CaptureOptions (Content-Type:
//	                      application/json); 200, the CaptureState
//	POST /capture/stop    200, the CaptureState of the stopped capture
//
// Errors are {"error": "..."}: 409 for ErrCaptureRunning and ErrNoCapture,
// 400 for ErrCaptureDir, ErrCaptureOptions and a malformed request, 401
// without the bearer token (when there is one), 405 for a wrong method,
// 415 for a body that is not JSON, 413 for one over 64 KiB, 500 otherwise.

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// AdminPrefix is the path under which AdminHandler serves (the pattern to
// mount it at on a mux).
const AdminPrefix = "/capture/"

// maxAdminBody bounds a request's body: capture options are a few fields.
const maxAdminBody = 64 << 10

// minAdminToken is the shortest bearer token accepted from a token file.
const minAdminToken = 16

// AdminHandler serves the capture controls c. If token is not empty,
// every request must carry it as "Authorization: Bearer TOKEN".
func AdminHandler(c Controls, token string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(AdminPrefix+"status", func(w http.ResponseWriter, r *http.Request) {
		if !allowMethod(w, r, http.MethodGet) {
			return
		}
		writeJSON(w, http.StatusOK, c.Status())
	})
	mux.HandleFunc(AdminPrefix+"start", func(w http.ResponseWriter, r *http.Request) {
		if !allowMethod(w, r, http.MethodPost) {
			return
		}
		o, status, err := readCaptureOptions(w, r)
		if err != nil {
			writeError(w, status, err.Error())
			return
		}
		st, err := c.Start(r.Context(), o)
		if err != nil {
			writeError(w, adminStatus(err), err.Error())
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
	mux.HandleFunc(AdminPrefix+"stop", func(w http.ResponseWriter, r *http.Request) {
		if !allowMethod(w, r, http.MethodPost) {
			return
		}
		// Stopping waits for every session to leave at a command
		// boundary: the client's context bounds the wait.
		st, err := c.Stop(r.Context())
		if err != nil {
			writeError(w, adminStatus(err), err.Error())
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no capture control at %s; the controls are %sstatus, %sstart and %sstop", r.URL.Path, AdminPrefix, AdminPrefix, AdminPrefix))
	})
	if token == "" {
		return mux
	}
	// Comparing digests keeps the comparison's time independent of the
	// token's length as well as its bytes.
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="tandem proxy"`)
			writeError(w, http.StatusUnauthorized, "this proxy's capture controls need its admin token: pass --admin-token-file FILE (the file given to tandem proxy --admin-token-file)")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// adminStatus is the HTTP status of an error of the Controls.
func adminStatus(err error) int {
	switch {
	case errors.Is(err, ErrCaptureRunning), errors.Is(err, ErrNoCapture):
		return http.StatusConflict
	case errors.Is(err, ErrCaptureDir), errors.Is(err, ErrCaptureOptions):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// allowMethod answers 405 (with Allow) unless r's method is method.
func allowMethod(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method {
		return true
	}
	w.Header().Set("Allow", method)
	writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, method))
	return false
}

// readCaptureOptions decodes a start request's body, or says what is
// wrong with it and the status that goes with it. Requiring a JSON
// content type keeps a browser's cross-site form post from starting a
// capture (a form cannot send one without a CORS preflight).
func readCaptureOptions(w http.ResponseWriter, r *http.Request) (CaptureOptions, int, error) {
	var o CaptureOptions
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return o, http.StatusUnsupportedMediaType, errors.New("the body must be JSON capture options, sent with Content-Type: application/json")
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAdminBody))
	dec.DisallowUnknownFields()
	err = dec.Decode(&o)
	if err == nil {
		switch _, terr := dec.Token(); {
		case errors.As(terr, new(*http.MaxBytesError)):
			err = terr
		case terr != io.EOF:
			err = errors.New("data after the JSON object")
		}
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return o, http.StatusRequestEntityTooLarge, fmt.Errorf("the body is over %d bytes; capture options are a few fields", maxAdminBody)
	case errors.Is(err, io.EOF):
		return o, http.StatusBadRequest, errors.New("the body is empty; send the capture options as a JSON object (at least {\"dir\": \"/new/dir\"})")
	case err != nil:
		return o, http.StatusBadRequest, fmt.Errorf("capture options: %v", err)
	}
	return o, 0, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// AdminFor decides whether the admin interface is served on the metrics
// listener at addr (as given to --metrics-addr: "HOST:PORT", ":PORT"
// meaning loopback, or "off"), and with which token (read from
// tokenFile, if given). It is on when enabled and the address is
// loopback, or when enabled, elsewhere, with a token file. When it is off
// although enabled, notice says why, for the proxy's log.
func AdminFor(addr, tokenFile string, enabled bool) (token string, on bool, notice string, err error) {
	if !enabled {
		return "", false, "", nil
	}
	if addr == "" || addr == "off" {
		return "", false, "the capture controls (tandem capture start|stop|status) are off: they are served on the metrics address, and --metrics-addr is off", nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false, "", fmt.Errorf("metrics address %q: want HOST:PORT, :PORT or off: %v", addr, err)
	}
	if tokenFile != "" {
		if token, err = ReadAdminToken(tokenFile); err != nil {
			return "", false, "", err
		}
		return token, true, "", nil
	}
	if !isLoopback(host) {
		return "", false, fmt.Sprintf("the capture controls (tandem capture start|stop|status) are off: the metrics address %s is not loopback, and off loopback they need --admin-token-file FILE (a token of %d or more characters, in a file of mode 600)", addr, minAdminToken), nil
	}
	return "", true, "", nil
}

// ReadAdminToken reads the bearer token of --admin-token-file: at least
// 16 printable characters (surrounding whitespace is trimmed), in a file
// that only its owner can read.
func ReadAdminToken(file string) (string, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return "", fmt.Errorf("--admin-token-file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("--admin-token-file %s is not a regular file", file)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("--admin-token-file %s can be read by others than its owner (mode %04o); make it private: chmod 600 %s", file, perm, file)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--admin-token-file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	for _, c := range []byte(token) {
		if c < 0x21 || c > 0x7e {
			return "", fmt.Errorf("--admin-token-file %s: the token must be printable ASCII without spaces (it is sent in an HTTP header); for one: head -c 24 /dev/urandom | base64 > %s", file, file)
		}
	}
	if len(token) < minAdminToken {
		return "", fmt.Errorf("--admin-token-file %s: the token has %d characters, want at least %d; for one: head -c 24 /dev/urandom | base64 > %s", file, len(token), minAdminToken, file)
	}
	return token, nil
}

// isLoopback says whether host (of a listen address; "" is loopback, as
// metricsrv binds it) only accepts connections from this machine.
func isLoopback(host string) bool {
	if host == "" || strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckCaptureDir says whether dir can be a capture started at runtime,
// and returns it absolute and cleaned (the path to create the capture
// at). It refuses, wrapping ErrCaptureDir, an empty path, a path that
// exists and is not an empty directory, and, when root is not empty, a
// path that is not inside root once the symbolic links of its existing
// part are resolved.
func CheckCaptureDir(root, dir string) (string, error) {
	if strings.TrimSpace(dir) == "" {
		return "", fmt.Errorf("%w: no directory given; name a new directory for the capture", ErrCaptureDir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrCaptureDir, dir, err)
	}
	// Inside the root first: what lies outside it is none of the
	// caller's business, not even whether it exists.
	if root != "" {
		rootAbs, err := filepath.Abs(root)
		if err != nil {
			return "", fmt.Errorf("%w: --capture-root %s: %v", ErrCaptureDir, root, err)
		}
		realRoot, err := resolveExisting(rootAbs)
		if err != nil {
			return "", fmt.Errorf("%w: --capture-root %s: %v", ErrCaptureDir, root, err)
		}
		realDir, err := resolveExisting(abs)
		if err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrCaptureDir, abs, err)
		}
		rel, err := filepath.Rel(realRoot, realDir)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			where := ""
			if realDir != abs {
				where = fmt.Sprintf(" (it is %s once symbolic links are followed)", realDir)
			}
			return "", fmt.Errorf("%w: %s is not inside the proxy's --capture-root %s%s; give a directory under %s", ErrCaptureDir, abs, rootAbs, where, rootAbs)
		}
		if rel == "." {
			return "", fmt.Errorf("%w: %s is the proxy's --capture-root itself; give a new directory inside it", ErrCaptureDir, abs)
		}
	}
	fi, err := os.Stat(abs)
	switch {
	case err == nil && !fi.IsDir():
		return "", fmt.Errorf("%w: %s exists and is not a directory; give a new directory", ErrCaptureDir, abs)
	case err == nil:
		entries, err := os.ReadDir(abs)
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrCaptureDir, err)
		}
		if len(entries) > 0 {
			if holdsCapture(entries) {
				return "", fmt.Errorf("%w: %s already holds a capture; give a new directory (tandem never writes over one)", ErrCaptureDir, abs)
			}
			return "", fmt.Errorf("%w: %s already holds files; give a new directory", ErrCaptureDir, abs)
		}
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("%w: %v", ErrCaptureDir, err)
	}
	return abs, nil
}

// holdsCapture says whether a directory's entries are a capture's (a
// Pebble store: store.Create's test, or a TANDEM marker).
func holdsCapture(entries []os.DirEntry) bool {
	for _, e := range entries {
		n := e.Name()
		if n == "TANDEM" || n == "CURRENT" || strings.HasPrefix(n, "marker.manifest.") {
			return true
		}
	}
	return false
}

// resolveExisting resolves the symbolic links of the longest existing
// prefix of the absolute, clean path p and appends the rest to it.
func resolveExisting(p string) (string, error) {
	rest := ""
	for {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", err
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}
