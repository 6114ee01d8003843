package metricsrv

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Profiles are served only when asked; ":PORT" binds loopback; "off"
// serves nothing.
func TestListen(t *testing.T) {
	for _, withPprof := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		addr, wait, err := Listen(ctx, ":0", prometheus.NewRegistry(), nil, withPprof)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(addr, "127.0.0.1:") {
			t.Errorf(":0 bound %s, want loopback", addr)
		}
		if c := get(t, "http://"+addr+"/metrics"); c != 200 {
			t.Errorf("/metrics: %d", c)
		}
		want := 404
		if withPprof {
			want = 200
		}
		if c := get(t, "http://"+addr+"/debug/pprof/"); c != want {
			t.Errorf("pprof %v: /debug/pprof/ answered %d, want %d", withPprof, c, want)
		}
		cancel()
		wait()
	}
	if addr, _, err := Listen(context.Background(), Off, prometheus.NewRegistry(), nil, true); addr != "" || err != nil {
		t.Errorf("off: %q, %v", addr, err)
	}
}

// Extra routes are served next to /metrics; a route that clashes with one
// of the endpoint's own is an error, not a panic, and binds nothing.
func TestListenRoutes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, "hello "+r.URL.Path)
	})
	addr, wait, err := Listen(ctx, ":0", prometheus.NewRegistry(), nil, false, Route{Pattern: "/extra/", Handler: hello})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/extra/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot || string(body) != "hello /extra/x" {
		t.Errorf("/extra/x: %d %q, want 418 \"hello /extra/x\"", resp.StatusCode, body)
	}
	if c := get(t, "http://"+addr+"/metrics"); c != 200 {
		t.Errorf("/metrics with a route: %d", c)
	}
	if c := get(t, "http://"+addr+"/other"); c != 404 {
		t.Errorf("/other: %d, want 404", c)
	}
	cancel()
	wait()

	for _, r := range []Route{{Pattern: "/metrics", Handler: hello}, {Pattern: "/x", Handler: nil}} {
		_, _, err := Listen(context.Background(), ":0", prometheus.NewRegistry(), nil, false, r)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("route %q", r.Pattern)) {
			t.Errorf("route %q: err %v, want one naming the route", r.Pattern, err)
		}
	}
}
