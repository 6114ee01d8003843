// Package metricsrv serves a Prometheus registry over HTTP for as long as a
// context lives.
package metricsrv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Off disables the endpoint when given as the address.
const Off = "off"

// Route is an extra handler served on the endpoint next to /metrics (the
// proxy's capture controls, for one). Pattern is an http.ServeMux pattern.
type Route struct {
	Pattern string
	Handler http.Handler
}

// Listen resolves addr ("off", "HOST:PORT", or ":PORT" meaning loopback)
// and starts serving /metrics from g (and, with withPprof, Go's profiles
// under /debug/pprof/) in a goroutine that ends with ctx.
// It returns the bound address ("" when off) and a function that waits for
// the server to stop.
// The handler's own metrics go into reg, if not nil. Each of routes is
// served too, with whatever access control its handler does itself.
func Listen(ctx context.Context, addr string, g prometheus.Gatherer, reg *prometheus.Registry, withPprof bool, routes ...Route) (string, func(), error) {
	if addr == "" || addr == Off {
		return "", func() {}, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, fmt.Errorf("metrics address %q: want HOST:PORT, :PORT or %q: %v", addr, Off, err)
	}
	if host == "" {
		host = "127.0.0.1" // loopback unless asked otherwise
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return "", nil, fmt.Errorf("metrics endpoint: %w (choose another with --metrics-addr, or --metrics-addr=%s)", err, Off)
	}
	mux := http.NewServeMux()
	var opts promhttp.HandlerOpts
	if reg != nil { // (a nil *Registry in the interface would be called)
		opts.Registry = reg
	}
	mux.Handle("/metrics", promhttp.HandlerFor(g, opts))
	// Profiles, on the same (by default loopback) endpoint, only when asked:
	// they expose the process's memory and stacks.
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	for _, r := range routes {
		if err := register(mux, r); err != nil {
			ln.Close()
			return "", nil, err
		}
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // the listener failed; nothing left to serve
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	return ln.Addr().String(), func() { <-done }, nil
}

// register adds r to mux, turning ServeMux's panic on a bad or duplicate
// pattern into an error.
func register(mux *http.ServeMux, r Route) (err error) {
	if r.Handler == nil {
		return fmt.Errorf("metrics endpoint: route %q has no handler", r.Pattern)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("metrics endpoint: route %q: %v", r.Pattern, p)
		}
	}()
	mux.Handle(r.Pattern, r.Handler)
	return nil
}
