package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/tandemdb/tandem/proxy"
	"github.com/tandemdb/tandem/report"
)

// defaultAdminAddr is tandem proxy's default --metrics-addr, where the
// capture controls are served.
const defaultAdminAddr = "127.0.0.1:9470"

// now is the clock the capture commands show times against (tests set it).
var now = time.Now

func newCaptureCmd() *cobra.Command {
	var cl adminClient
	cmd := &cobra.Command{
		Use:   "capture start|stop|status  |  capture (--from-pcap FILE… | --interface IF | --from-log FILE… --format F) DIR",
		Short: "Start and stop captures on a running tandem proxy, or capture from packets or server logs",
		Long: `A proxy started without --capture relays clients to the server and records
nothing; 'tandem capture start DIR' makes it record into a new capture
directory from now on, 'tandem capture stop' ends that capture, and the
proxy goes on relaying. Clients notice nothing: no connection is closed or
held.

A capture started at runtime takes in the sessions already open, each at
its next command, with its state: its schema, the session variables it
SET, autocommit, its prepared statements (synthetic records, marked as
such: 'tandem inspect' counts them apart). A session inside a transaction
that has only read joins at once, with a START TRANSACTION; its records up
to that transaction's end are replayed but, where they differ from the
captured answers, counted apart (started-before-capture): their snapshot
began before the capture. A session inside a transaction that has written
joins when that transaction ends: its writes came before the capture, and
its commit is one the capture did not see (with the proxy's --binlog-user
it is listed among the transactions that bypassed the proxy, which
'tandem replay --apply-bypassed' applies). 'tandem capture status' counts
the sessions still waiting. A session still open at the stop gets a
synthetic end there; replay closes its connection, which rolls back the
transaction it left open. With --binlog-user, a transaction that has
written and is open at the stop ends in the capture: the stop waits for
it, for up to the proxy's --drain-timeout, and records its commit, which
comes before the end point (its session leaves once the transaction
ended). One still open then makes its session wait, before its next
command, until the end point is read (a round trip to the server): its
commit comes after the end point, as the transaction does not in the
capture.
Sessions that connect during the capture are recorded from their login.

A capture ends with 'tandem capture stop', when its --duration runs out,
when it reaches --max-bytes on disk, when the disk is about to fill (the
proxy's --capture-min-free) or fails, or when the proxy shuts down; every
way closes it cleanly, and 'tandem capture status' says which it was.
With --binlog-user and --shadow on the proxy, each capture records its
start and end points and feeds the shadows, as one started with --capture.

These commands talk to the proxy's admin interface, served on its
--metrics-addr (loopback by default); give that address with --proxy.
Off loopback the proxy needs --admin-token-file, and so do these commands
(the same token, sent as a bearer token).` + sniffHelp,
		Example: `  tandem proxy --backend 127.0.0.1:3306 &
  tandem capture start ./capture --duration 15m
  tandem capture status
  tandem capture stop
  tandem inspect ./capture
  # a proxy whose metrics address is not loopback
  tandem capture status --proxy db1:9470 --admin-token-file ~/.tandem-token
  # no proxy: what tcpdump saw, or a live interface
  tcpdump -i lo -s 0 -B 65536 -w traffic.pcap tcp port 3306
  tandem capture --from-pcap traffic.pcap --port 3306 --schema app ./capture
  tandem capture --interface eth0 --port 3306 --duration 10m ./capture
  # no proxy, no packets: what the server logged
  tandem capture --from-log /var/lib/mysql/general.log --format general ./capture
  tandem capture --from-log server_audit.log.1,server_audit.log --format audit --log-time-zone UTC ./capture`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&cl.addr, "proxy", defaultAdminAddr, "the proxy's admin interface: the `ADDR` (HOST:PORT) of its --metrics-addr")
	pf.StringVar(&cl.tokenFile, "admin-token-file", "", "send the token in this `FILE` (the proxy's --admin-token-file) as a bearer token")
	cmd.AddCommand(newCaptureStartCmd(&cl), newCaptureStopCmd(&cl), newCaptureStatusCmd(&cl))
	var sf sniffFlags
	sf.add(cmd)
	cmd.RunE = sf.run
	cmd.Args = cobra.ArbitraryArgs
	return cmd
}

func newCaptureStartCmd(cl *adminClient) *cobra.Command {
	var duration time.Duration
	var maxBytes int64
	var results string
	cmd := &cobra.Command{
		Use:   "start DIR",
		Short: "Make the proxy record into a new capture directory from now on",
		Long: `Starts a capture on the running proxy, into DIR: a new or empty
directory, on the proxy's machine (a relative DIR is made absolute here,
against this command's working directory). A proxy given --capture-root
accepts only directories inside it.

Sessions already open join the capture at their next command, with their
state; one inside a transaction that has written joins when the
transaction ends. The capture ends with 'tandem capture stop', after
--duration, at --max-bytes, when the disk is about to fill, or when the
proxy shuts down.`,
		Example: `  tandem capture start ./capture
  tandem capture start /var/lib/tandem/cap-$(date +%F) --duration 15m --max-bytes 10737418240
  tandem capture start ./capture --capture-results checksum --proxy 127.0.0.1:9470`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("capture start takes one directory, got %d arguments; see 'tandem capture start --help'", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if duration < 0 {
				return fmt.Errorf("--duration %v must not be negative (0: until 'tandem capture stop')", duration)
			}
			if maxBytes < 0 {
				return fmt.Errorf("--max-bytes %d must not be negative (0: the proxy's --capture-max-bytes)", maxBytes)
			}
			results = strings.ToLower(results)
			if results != "" && results != proxy.ResultsSummary && results != proxy.ResultsChecksum {
				return fmt.Errorf("--capture-results %q: want %s or %s", results, proxy.ResultsSummary, proxy.ResultsChecksum)
			}
			dir, err := filepath.Abs(args[0])
			if err != nil {
				return fmt.Errorf("capture directory %s: %w", args[0], err)
			}
			o := proxy.CaptureOptions{Dir: dir, Duration: proxy.Duration(duration), MaxBytes: maxBytes, Results: results}
			var st proxy.CaptureState
			if err := cl.do(c.Context(), http.MethodPost, "start", o, &st); err != nil {
				return err
			}
			writeStarted(c.OutOrStdout(), st)
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&duration, "duration", 0, "stop the capture after this long (0: until 'tandem capture stop')")
	f.Int64Var(&maxBytes, "max-bytes", 0, "stop the capture once it takes this many bytes on disk (0: the proxy's --capture-max-bytes)")
	f.StringVar(&results, "capture-results", "", "what to record of result sets: summary or checksum (default: the proxy's --capture-results)")
	return cmd
}

func newCaptureStopCmd(cl *adminClient) *cobra.Command {
	return &cobra.Command{
		Use:   "stop",
		Short: "End the running capture; the proxy goes on relaying",
		Long: `Ends the proxy's running capture: each session leaves it at its next
command boundary, the capture's end point is read (with the proxy's
--binlog-user), and the capture is closed. Then it prints what the
capture holds. Waiting for the sessions can take a moment; Ctrl-C stops
waiting here, not the proxy's stop.`,
		Example: `  tandem capture stop
  tandem capture stop --proxy 127.0.0.1:9470`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			var st proxy.CaptureState
			if err := cl.do(c.Context(), http.MethodPost, "stop", nil, &st); err != nil {
				return err
			}
			writeStopped(c.OutOrStdout(), st)
			return nil
		},
	}
}

func newCaptureStatusCmd(cl *adminClient) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Say whether the proxy is capturing, into what, and how the last capture ended",
		Example: `  tandem capture status
  tandem capture status --json | jq .current.records`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			var raw json.RawMessage
			if err := cl.do(c.Context(), http.MethodGet, "status", nil, &raw); err != nil {
				return err
			}
			if asJSON {
				var b bytes.Buffer
				if err := json.Indent(&b, raw, "", "  "); err != nil {
					return fmt.Errorf("the proxy's status: %w", err)
				}
				b.WriteByte('\n')
				_, err := c.OutOrStdout().Write(b.Bytes())
				return err
			}
			var s proxy.Status
			if err := json.Unmarshal(raw, &s); err != nil {
				return fmt.Errorf("the proxy's status: %w", err)
			}
			writeStatus(c.OutOrStdout(), s)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the proxy's status as JSON")
	return cmd
}

// adminClient calls a proxy's admin interface (proxy.AdminHandler).
type adminClient struct {
	addr      string // --proxy
	tokenFile string // --admin-token-file
	hostPort  string // addr, with ":PORT" made loopback
	token     string
	http      *http.Client
}

// init checks the address and reads the token file, if any.
func (cl *adminClient) init() error {
	tokenFile := cl.tokenFile
	addr := cl.addr
	if strings.Contains(addr, "://") {
		return fmt.Errorf("--proxy %q: want HOST:PORT (the proxy's --metrics-addr), not a URL", addr)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return fmt.Errorf("--proxy %q: want HOST:PORT, the proxy's --metrics-addr (default %s)", addr, defaultAdminAddr)
	}
	if host == "" {
		host = "127.0.0.1" // as the proxy binds ":PORT"
	}
	cl.hostPort = net.JoinHostPort(host, port)
	if ip := net.ParseIP(host); tokenFile == "" && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		// Off loopback the proxy answers its controls only with a token:
		// say so here rather than send a request that cannot succeed.
		return fmt.Errorf("--proxy %s is not a loopback address: off loopback a proxy's capture controls need its token; give --admin-token-file FILE (the file given to the proxy)", addr)
	}
	if tokenFile != "" {
		if fi, err := os.Stat(tokenFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
			// The proxy refuses such a file; so does its client.
			return fmt.Errorf("--admin-token-file %s can be read by others than its owner (mode %04o); make it private: chmod 600 %s", tokenFile, fi.Mode().Perm(), tokenFile)
		}
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return fmt.Errorf("--admin-token-file: %w", err)
		}
		if cl.token = strings.TrimSpace(string(b)); cl.token == "" {
			return fmt.Errorf("--admin-token-file %s is empty; it holds the token given to the proxy", tokenFile)
		}
	}
	cl.http = &http.Client{Transport: &http.Transport{
		Proxy:                 nil, // the proxy's admin address, never an HTTP proxy
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		ResponseHeaderTimeout: 0, // stop waits for sessions to drain
	}}
	return nil
}

// do sends a request to the control named path with in as its JSON body
// (if not nil) and decodes the answer into out, or returns what went
// wrong as one line.
func (cl *adminClient) do(ctx context.Context, method, path string, in, out any) error {
	if err := cl.init(); err != nil {
		return err
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+cl.hostPort+proxy.AdminPrefix+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cl.token != "" {
		req.Header.Set("Authorization", "Bearer "+cl.token)
	}
	resp, err := cl.http.Do(req)
	if err != nil {
		return cl.dialError(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("reading the proxy's answer at %s: %w", cl.addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return errors.New(e.Error)
		}
		if resp.StatusCode == http.StatusNotFound {
			return fmt.Errorf("%s answers but serves no capture controls: start tandem proxy with --admin (the default), and off loopback with --admin-token-file; check that %s is the proxy's --metrics-addr", cl.addr, cl.addr)
		}
		return fmt.Errorf("the proxy at %s answered %s: %s", cl.addr, resp.Status, strings.TrimSpace(string(b)))
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("the proxy at %s: unreadable answer: %w", cl.addr, err)
	}
	return nil
}

// dialError says what a failed request means for the user.
func (cl *adminClient) dialError(err error) error {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("no proxy answers at %s: the capture controls are served on tandem proxy's --metrics-addr (default %s); give that address with --proxy ADDR, and check that the proxy runs (curl http://%s%sstatus)", cl.addr, defaultAdminAddr, cl.hostPort, proxy.AdminPrefix)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("interrupted waiting for the proxy at %s (the proxy goes on with the request)", cl.addr)
	}
	return fmt.Errorf("cannot reach the proxy at %s: %w", cl.addr, err)
}

// clock shows t as the time of day, with the date if it is not today's.
func clock(t time.Time) string {
	t = t.Local()
	y, m, d := t.Date()
	ny, nm, nd := now().Local().Date()
	if y == ny && m == nm && d == nd {
		return t.Format("15:04:05")
	}
	return t.Format("2006-01-02 15:04:05")
}

// limits says when a running capture stops by itself.
func limits(st proxy.CaptureState, after bool) string {
	var l []string
	if !st.Deadline.IsZero() {
		if after {
			l = append(l, "after "+st.Deadline.Sub(st.Started).Round(time.Second).String())
		} else {
			l = append(l, "at "+clock(st.Deadline))
		}
	}
	if st.MaxBytes > 0 {
		l = append(l, "at "+report.Bytes(st.MaxBytes)+" on disk")
	}
	if len(l) == 0 {
		return "until 'tandem capture stop'"
	}
	return "stops " + strings.Join(l, " or ")
}

func writeStarted(w io.Writer, st proxy.CaptureState) {
	fmt.Fprintf(w, "tandem capture: capturing into %s since %s (%s)\n", st.Dir, clock(st.Started), limits(st, true))
	if st.OpenAtStart > 0 || st.Waiting > 0 {
		fmt.Fprintf(w, "tandem capture: %s it at their next command", sessionCount(st.OpenAtStart, "open session joins", "open sessions join"))
		if st.Waiting > 0 {
			fmt.Fprintf(w, " (%d in a transaction that has written: when it ends)", st.Waiting)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "tandem capture: see it with 'tandem capture status'; end it with 'tandem capture stop'")
}

func sessionCount(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// reasonText says why a capture stopped.
func reasonText(reason string) string {
	switch reason {
	case proxy.StopRequested:
		return "stopped on request"
	case proxy.StopDuration:
		return "its --duration ran out"
	case proxy.StopMaxBytes:
		return "it reached its --max-bytes"
	case proxy.StopDiskFull:
		return "the disk was about to fill, or failed"
	case proxy.StopShutdown:
		return "the proxy shut down"
	case "":
		return "no reason given"
	}
	return reason
}

// writeCounts prints a capture's records, sessions, points and error.
func writeCounts(w io.Writer, st proxy.CaptureState) {
	fmt.Fprintf(w, "  records:  %d", st.Records)
	if st.Dropped > 0 {
		fmt.Fprintf(w, ", %d dropped (the disk fell behind)", st.Dropped)
	} else {
		fmt.Fprint(w, ", none dropped")
	}
	fmt.Fprintln(w)
	waiting := "waiting for a transaction that has written to end"
	if !st.Stopped.IsZero() {
		waiting = "still waiting (in a transaction that had written): not captured"
	}
	fmt.Fprintf(w, "  sessions: %d open at its start, %d connected during it, %d %s\n", st.OpenAtStart, st.Connected, st.Waiting, waiting)
	if st.StartGTID != "" || st.EndGTID != "" {
		fmt.Fprintf(w, "  GTIDs:    start %s", show(st.StartGTID))
		if st.EndGTID != "" {
			fmt.Fprintf(w, ", end %s", show(st.EndGTID))
		}
		fmt.Fprintln(w)
	}
	if st.Err != "" {
		fmt.Fprintf(w, "  error:    %s\n", st.Err)
	}
}

func writeStopped(w io.Writer, st proxy.CaptureState) {
	fmt.Fprintf(w, "tandem capture: stopped capturing into %s: %s (%s to %s, %s)\n", st.Dir, reasonText(st.Reason),
		clock(st.Started), clock(st.Stopped), st.Stopped.Sub(st.Started).Round(time.Second))
	writeCounts(w, st)
	fmt.Fprintf(w, "tandem capture: see what it holds with 'tandem inspect %s'\n", st.Dir)
}

func writeStatus(w io.Writer, s proxy.Status) {
	if s.Capturing && s.Current != nil {
		st := *s.Current
		fmt.Fprintf(w, "tandem capture: capturing into %s since %s (%s)\n", st.Dir, clock(st.Started), limits(st, false))
		writeCounts(w, st)
		fmt.Fprintf(w, "  results:  %s\n", st.Results)
	} else {
		fmt.Fprintln(w, "tandem capture: not capturing")
	}
	fmt.Fprintf(w, "the proxy relays %s\n", sessionCount(s.Sessions, "session", "sessions"))
	if l := s.Last; l != nil {
		fmt.Fprintf(w, "last capture: %s, %s to %s: %s\n", l.Dir, clock(l.Started), clock(l.Stopped), reasonText(l.Reason))
		writeCounts(w, *l)
	}
}
