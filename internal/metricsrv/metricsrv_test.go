package metricsrv

import (
	"context"
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
