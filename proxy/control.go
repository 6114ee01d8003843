package proxy

import (
	"context"
	"errors"
	"time"
)

// Errors of the capture controls (Controls). The admin interface maps each
// to its HTTP status; the CLI prints the message.
var (
	// ErrCaptureRunning: a capture is already running (stop it first).
	ErrCaptureRunning = errors.New("proxy: a capture is already running")
	// ErrNoCapture: no capture is running.
	ErrNoCapture = errors.New("proxy: no capture is running")
	// ErrCaptureDir: the capture directory cannot be used (it holds a
	// capture or other files, is outside --capture-root, or is not a
	// directory path at all).
	ErrCaptureDir = errors.New("proxy: capture directory refused")
	// ErrCaptureOptions: an option of the request is wrong.
	ErrCaptureOptions = errors.New("proxy: bad capture options")
)

// CaptureOptions are what a capture started at runtime is asked for.
type CaptureOptions struct {
	// Dir is the new capture directory (it must not exist, or be empty).
	Dir string `json:"dir"`
	// Duration, if positive, stops the capture after that long.
	Duration Duration `json:"duration,omitempty"`
	// MaxBytes, if positive, stops the capture once it takes that many
	// bytes on disk (the proxy's --capture-max-bytes otherwise).
	MaxBytes int64 `json:"max_bytes,omitempty"`
	// Results is summary or checksum ("": the proxy's --capture-results).
	Results string `json:"results,omitempty"`
}

// Duration is a time.Duration that reads and writes JSON as Go's duration
// text ("15m", "1h30m").
type Duration time.Duration

// MarshalText writes d as Go's duration text.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads Go's duration text.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Stop reasons: why a capture ended (CaptureState.Reason and the
// tandem_proxy_capture_stops_total{reason} label). Part of the metrics'
// contract: a dashboard names them.
const (
	StopRequested = "requested" // tandem capture stop (the admin interface)
	StopDuration  = "duration"  // its --duration ran out
	StopMaxBytes  = "max-bytes" // it reached its size budget
	StopDiskFull  = "disk"      // the disk was about to fill, or failed
	StopShutdown  = "shutdown"  // the proxy was stopped (SIGINT, SIGTERM)
)

// StopReasons lists every stop reason, in the order reports show them.
func StopReasons() []string {
	return []string{StopRequested, StopDuration, StopMaxBytes, StopDiskFull, StopShutdown}
}

// CaptureState says what one capture is or was doing.
type CaptureState struct {
	Dir     string    `json:"dir"`
	Started time.Time `json:"started"`
	// Stopped is zero while it runs; Reason says why it stopped and Err
	// what failed, if anything did (a full disk).
	Stopped time.Time `json:"stopped,omitzero"`
	Reason  string    `json:"reason,omitempty"`
	Err     string    `json:"error,omitempty"`
	// Deadline is when --duration stops it (zero: no duration).
	Deadline time.Time `json:"deadline,omitzero"`
	MaxBytes int64     `json:"max_bytes,omitempty"`
	Results  string    `json:"results"`
	// Records committed to the capture and dropped (the disk was behind).
	Records uint64 `json:"records"`
	Dropped uint64 `json:"dropped"`
	// Sessions in the capture: Joined at its start (open then) or
	// Connected during it; Waiting is sessions open at its start inside a
	// transaction that had written, which join when it ends.
	OpenAtStart int `json:"open_at_start"`
	Connected   int `json:"connected"`
	Waiting     int `json:"waiting"`
	// StartGTID and EndGTID are the backend's positions (--binlog-user).
	StartGTID string `json:"start_gtid,omitempty"`
	EndGTID   string `json:"end_gtid,omitempty"`
}

// Status is the proxy's capture state: the running capture, if any, and
// the last one that stopped.
type Status struct {
	Capturing bool          `json:"capturing"`
	Current   *CaptureState `json:"current,omitempty"`
	Last      *CaptureState `json:"last,omitempty"`
	// Sessions is how many client sessions the proxy relays now.
	Sessions int `json:"sessions"`
}

// Controls start and stop captures on a running proxy (the admin
// interface serves them; Runner implements them).
type Controls interface {
	// Start begins a capture: sessions open now join it at their next
	// command boundary with their state (see capture.Session.Join).
	Start(ctx context.Context, o CaptureOptions) (CaptureState, error)
	// Stop ends the running capture: each session leaves at a command
	// boundary, the capture's end point is read, and the capture closes.
	Stop(ctx context.Context) (CaptureState, error)
	Status() Status
}
