package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/proxy"
	"github.com/tandemdb/tandem/serverlog"
	"github.com/tandemdb/tandem/sniff"
	"github.com/tandemdb/tandem/store"
)

// sniffFlags are tandem capture's own flags: a capture read from packets.
type sniffFlags struct {
	pcaps          []string
	iface          string
	ports          []uint
	schema         string
	duration       time.Duration
	results        string
	maxRecordBytes int
	keys           keyFlag
	logs           []string
	format         string
	timeZone       string
	auditLimit     int
	ringMB         int
}

const sniffHelp = `
Without a proxy: 'tandem capture --from-log FILE… --format general|slow|audit
DIR' reads what the server logged of its own traffic: the general log
(general_log=ON; log_output=FILE, or TABLE: the table's general_log.CSV
file, or 'mariadb -B -e "SELECT * FROM mysql.general_log"' saved to a
file), the slow log with long_query_time=0, or
MariaDB's server_audit log (server_audit_events=CONNECT,QUERY, file
output). Such a capture has sessions (by connection id), connects with
user and schema, every statement in the server's order with its time, and
executes of prepared statements with their values as the log writes them
(replayed as text); the slow log adds each statement's duration, the
audit log the error each statement ended with (RETCODE). It has no other
answers: replay compares the targets with each other, and with production
only by those errors, and says so. A statement the audit log says ended
in a deadlock or lock wait timeout is handled as the server did (not
sent; with a deadlock its transaction rolled back there). The general and
slow logs do not say which statements failed: a transaction the server
rolled back for a deadlock, whose client then sent BEGIN again, replays
as committed by that BEGIN, on every target alike. Times are as precise as the log (MariaDB writes whole seconds; the
records of one second keep the log's order), in --log-time-zone. A
session whose connect is not in the log gets a synthetic one (counted)
in the schema the log names; the general log names none: give it with
--schema, or the
session's statements are not replayed until it says USE (counted);
passwords are masked and such statements not replayed. Give rotated
files oldest first.

Also without a proxy: 'tandem capture --from-pcap FILE… DIR' reads packet
captures (pcap or pcapng, as 'tcpdump -w' writes them) and 'tandem capture
--interface IF DIR' reads a live interface, into a new capture directory
DIR that replay, inspect, reports and shadows take as they take a proxy's.
Every TCP connection to a --port is reassembled both ways and its MySQL
conversation decoded by the proxy's own recorder: commands, prepared
statements and their parameters, answers (affected rows, row counts, row
checksums). Several files are merged in time order (rotated files, or
captures of several interfaces).

What a packet capture cannot know is labelled, never guessed ('tandem
inspect DIR' lists each kind with a count and an example):
  - sessions that began before the capture have no login: each is recorded
    from its first answer that says no transaction is open, with a
    synthetic connect in the --schema given (without it, its statements are
    not replayable until it says USE); statements it prepared before are
    unknown until prepared again (replay skips their executes), and a
    change it made before joining is one "lost commands" record, after
    which replay counts differences against the capture apart
    (after-skipped-write);
  - bytes the capture lost (tcpdump's "packets dropped by kernel", a cut
    file): the session's commands there are unknown, one "lost commands"
    record stands for them (replay then counts differences after it apart,
    against the capture and between targets: the session's transaction
    state is unknown from there), and the session is read again from its
    next command; an answer that lost bytes is compared between targets
    only;
  - TLS sessions are counted and skipped (encrypted); compressed sessions
    are read when their login was seen.
Record with 'tcpdump -i IF -s 0 -w FILE tcp port PORT' (as root, or with
CAP_NET_RAW; -s 0 keeps whole packets, -B 65536 makes drops rare). A
live --interface capture needs CAP_NET_RAW too and runs until --duration
or Ctrl-C. It reads a named interface or "any" (every interface; loopback
packets, which "any" sees going out and coming in, are read once), behind
a kernel filter on the --port(s), so other traffic costs it nothing; on a
busy host, tcpdump to a file and --from-pcap lose fewer packets.`

func (sf *sniffFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringSliceVar(&sf.pcaps, "from-pcap", nil, "read packet capture `FILE`s (pcap or pcapng; repeat the flag or separate with commas) into the capture directory DIR")
	f.StringVar(&sf.iface, "interface", "", "read the live network interface `IF` (e.g. lo, eth0, or any: every interface; needs CAP_NET_RAW) into DIR until --duration or Ctrl-C")
	f.UintSliceVar(&sf.ports, "port", []uint{3306}, "with --from-pcap or --interface: the server's TCP `PORT`s (connections to them are read)")
	f.StringVar(&sf.schema, "schema", "", "the schema of sessions that began before the capture (their login, which names it, was not seen; a log that names each statement's schema needs none); without it their statements are not replayed until they name one")
	f.DurationVar(&sf.duration, "duration", 0, "with --interface: stop after this long (0: at Ctrl-C)")
	f.IntVar(&sf.ringMB, "ring-mb", 64, "with --interface: the MiB of the kernel's packet ring (what arrives while it is full is dropped, and shows as gaps)")
	f.StringVar(&sf.results, "capture-results", proxy.ResultsChecksum, "with --from-pcap or --interface: what to record of result sets: summary (columns, rows, bytes) or checksum (also row checksums)")
	f.IntVar(&sf.maxRecordBytes, "max-record-bytes", 1<<20, "with --from-pcap or --interface: the SQL and data bytes a record keeps (longer ones are cut and not replayable)")
	f.StringSliceVar(&sf.logs, "from-log", nil, "read the server's log `FILE`s (oldest first; repeat the flag or separate with commas) of --format into DIR")
	f.StringVar(&sf.format, "format", "", "with --from-log: what the files are: general (the general log), slow (the slow log, long_query_time=0) or audit (MariaDB's server_audit file)")
	f.IntVar(&sf.auditLimit, "audit-query-limit", serverlog.DefaultAuditQueryLimit, "with --from-log --format audit: the server's server_audit_query_log_limit; the log cuts statements at that many bytes, and one logged that long is not replayed (counted)")
	f.StringVar(&sf.timeZone, "log-time-zone", "Local", "with --from-log: the time `ZONE` the log writes its times in (the server's time zone; an IANA name like Europe/Berlin, UTC, or Local); RFC 3339 times carry their own")
	sf.keys.add(f, "the capture")
}

func (sf *sniffFlags) set() bool { return len(sf.pcaps) > 0 || sf.iface != "" || len(sf.logs) > 0 }

// packetOnly names a flag given that only packets use, or "".
func packetOnly(c *cobra.Command) string {
	for _, name := range []string{"port", "max-record-bytes", "capture-results", "ring-mb"} {
		if c.Flags().Changed(name) {
			return name
		}
	}
	return ""
}

func (sf *sniffFlags) run(c *cobra.Command, args []string) error {
	switch {
	case !sf.set():
		return fmt.Errorf("tandem capture needs a subcommand (start, stop, status: captures on a running proxy) or a source (--from-pcap FILE…, --interface IF or --from-log FILE…) and a directory; see 'tandem capture --help'")
	case btoi(len(sf.pcaps) > 0)+btoi(sf.iface != "")+btoi(len(sf.logs) > 0) > 1:
		return errors.New("--from-pcap, --interface and --from-log cannot be used together: give one source")
	case len(sf.logs) > 0 && !slices.Contains(serverlog.Formats, sf.format):
		return fmt.Errorf("--from-log needs --format: one of %s (got %q)", strings.Join(serverlog.Formats, ", "), sf.format)
	case sf.format != "" && len(sf.logs) == 0:
		return errors.New("--format applies to --from-log only")
	case c.Flags().Changed("audit-query-limit") && sf.format != serverlog.Audit:
		return errors.New("--audit-query-limit applies to --from-log --format audit only")
	case sf.auditLimit <= 0:
		return fmt.Errorf("--audit-query-limit %d must be positive (the server's server_audit_query_log_limit; default %d)", sf.auditLimit, serverlog.DefaultAuditQueryLimit)
	case len(args) != 1:
		return fmt.Errorf("tandem capture --from-pcap/--interface takes one capture directory (new or empty), got %d arguments", len(args))
	case sf.duration < 0:
		return fmt.Errorf("--duration %v must not be negative (0: until Ctrl-C)", sf.duration)
	case sf.duration > 0 && sf.iface == "":
		return errors.New("--duration applies to --interface only: a file is read to its end")
	case len(sf.logs) > 0 && packetOnly(c) != "":
		// They were accepted and did nothing.
		return fmt.Errorf("--%s applies to --from-pcap and --interface only: a server log holds no packets and no results", packetOnly(c))
	case len(sf.ports) == 0:
		return errors.New("--port: give the server's port (default 3306)")
	case sf.ringMB <= 0:
		return fmt.Errorf("--ring-mb %d must be positive", sf.ringMB)
	case sf.maxRecordBytes <= 0:
		return fmt.Errorf("--max-record-bytes %d must be positive", sf.maxRecordBytes)
	}
	results := strings.ToLower(sf.results)
	if results != proxy.ResultsSummary && results != proxy.ResultsChecksum {
		return fmt.Errorf("--capture-results %q: want %s or %s", sf.results, proxy.ResultsSummary, proxy.ResultsChecksum)
	}
	var ports []uint16
	var portsInt []int
	for _, p := range sf.ports {
		if p == 0 || p > 65535 {
			return fmt.Errorf("--port %d is not a TCP port (1-65535)", p)
		}
		ports, portsInt = append(ports, uint16(p)), append(portsInt, int(p))
	}
	for _, p := range append(append([]string(nil), sf.pcaps...), sf.logs...) {
		if st, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		} else if st.IsDir() {
			return fmt.Errorf("%s is a directory: give the files in it", p)
		}
	}
	key, err := sf.keys.load()
	if err != nil {
		return err
	}
	dir := args[0]
	if len(sf.logs) > 0 {
		return sf.fromLog(c, dir, key)
	}
	origin := &store.Origin{Kind: store.OriginPcap, Inputs: sf.pcaps, Ports: portsInt}
	source := "pcap " + strings.Join(sf.pcaps, ",")
	var base time.Time
	var live *sniff.LiveSource
	if sf.iface != "" {
		origin.Kind, origin.Inputs, source = store.OriginInterface, []string{sf.iface}, "interface "+sf.iface
		// Opened first: a wrong interface left an empty capture directory
		// that the retry then refused.
		if live, err = sniff.OpenLive(sf.iface, sf.ringMB, ports); err != nil {
			return err
		}
	} else if base, err = firstPacketTime(sf.pcaps); err != nil {
		return err
	}
	w, err := store.Create(dir, fileCaptureOptions(store.WriterOptions{Source: source, Origin: origin, BaseTime: base, Key: key}))
	if err != nil {
		if live != nil {
			live.Close()
		}
		return err
	}
	rec := &appender{w: w}
	d := sniff.New(sniff.Config{Ports: ports, Schema: sf.schema,
		Capture: capture.Options{MaxRecordBytes: sf.maxRecordBytes, Checksums: results == proxy.ResultsChecksum}}, rec)
	out := c.OutOrStdout()
	ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var notes []sniff.FileNote
	var readErr error
	if sf.iface != "" {
		if sf.duration > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, sf.duration)
			defer cancel()
		}
		fmt.Fprintf(out, "reading %s (ports %v) into %s; Ctrl-C ends the capture\n", sf.iface, sf.ports, dir)
		readErr = live.Read(ctx, d, nil)
	} else {
		notes, readErr = sniff.ReadFiles(ctx, sf.pcaps, d, nil)
	}
	w.SetSourceStats(d.Stats())
	closeErr := w.Close()
	if readErr == nil {
		readErr = rec.err
	}
	if readErr != nil {
		switch {
		case errors.Is(readErr, context.Canceled):
			readErr = fmt.Errorf("interrupted: the capture in %s holds the %d records read before (%w)", dir, w.Stats().Committed, readErr)
		case closeErr == nil:
			readErr = fmt.Errorf("%w\nthe capture in %s holds the %d records read before it, its sessions ended there ('tandem inspect %s'); the rest cannot be read", readErr, dir, w.Stats().Committed, dir)
		}
		return errors.Join(readErr, closeErr)
	}
	if closeErr != nil {
		return fmt.Errorf("close the capture %s: %w", dir, closeErr)
	}
	writeSniffed(out, dir, origin.Kind, w.Stats().Committed, d.Stats(), notes, sf.schema)
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fromLog reads server logs into a new capture.
func (sf *sniffFlags) fromLog(c *cobra.Command, dir string, key *store.Key) error {
	loc, err := time.LoadLocation(sf.timeZone)
	if err != nil {
		return fmt.Errorf("--log-time-zone %q: %w", sf.timeZone, err)
	}
	first, precision, err := serverlog.FirstTime(sf.logs[0], sf.format, loc)
	if err != nil {
		return err
	}
	origin := &store.Origin{Kind: serverlog.OriginKind(sf.format), Inputs: sf.logs, NoResults: true, TimePrecision: precision}
	w, err := store.Create(dir, fileCaptureOptions(store.WriterOptions{Source: sf.format + " log " + strings.Join(sf.logs, ","), Origin: origin, BaseTime: first, Key: key}))
	if err != nil {
		return err
	}
	rec := &appender{w: w}
	ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, readErr := serverlog.Read(ctx, sf.logs, sf.format, serverlog.Options{Loc: loc, AuditQueryLimit: sf.auditLimit, Schema: sf.schema}, rec)
	w.SetSourceStats(st)
	closeErr := w.Close()
	if readErr == nil {
		readErr = rec.err
	}
	if readErr != nil {
		return errors.Join(readErr, closeErr)
	}
	if closeErr != nil {
		return fmt.Errorf("close the capture %s: %w", dir, closeErr)
	}
	out := c.OutOrStdout()
	answers := "no answers: replay compares targets with each other only"
	if sf.format == serverlog.Audit {
		answers = "no answers but the errors statements ended with: replay compares targets with each other, and with production by those errors"
	}
	fmt.Fprintf(out, "captured %d records into %s from the %s log (%s)\n", w.Stats().Committed, dir, sf.format, answers)
	for _, l := range st.Lines(origin.Kind) {
		fmt.Fprintf(out, "  %s\n", l)
	}
	fmt.Fprintf(out, "next: tandem inspect %s; tandem replay %s --target … --target …\n", dir, dir)
	return nil
}

// fileCaptureOptions bound what a capture read from files (or an
// interface) holds in memory: its records wait for the disk (Append)
// rather than pile up, so memory goes with the sessions open, not with
// the input's size.
func fileCaptureOptions(o store.WriterOptions) store.WriterOptions {
	o.MemTableSize, o.MaxPendingBytes = 8<<20, 8<<20
	return o
}

// appender writes records, waiting when the disk is behind (a file
// does not run away), and keeps the first error.
type appender struct {
	w   *store.Writer
	err error
}

func (a *appender) Record(r *store.Record) {
	if a.err != nil {
		return
	}
	if _, err := a.w.Append(r); err != nil {
		a.err = fmt.Errorf("write the capture: %w", err)
	}
}

// firstPacketTime is the earliest first packet of the files (the
// capture's time origin); zero if none holds one.
func firstPacketTime(paths []string) (time.Time, error) {
	var first time.Time
	for _, p := range paths {
		t, err := sniff.FirstTime(p)
		if err != nil {
			return time.Time{}, err
		}
		if !t.IsZero() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first, nil
}

func writeSniffed(w io.Writer, dir, kind string, records uint64, st *store.SourceStats, notes []sniff.FileNote, schema string) {
	fmt.Fprintf(w, "captured %d records into %s\n", records, dir)
	for _, l := range st.Lines(kind) {
		fmt.Fprintf(w, "  %s\n", l)
	}
	for _, n := range notes {
		fmt.Fprintf(w, "  note: %s %s\n", n.Path, n.Note)
	}
	if st.Gaps > 0 {
		fmt.Fprintln(w, "  note: bytes were lost; record with tcpdump -B 65536 (a larger buffer) or capture less traffic")
	}
	fmt.Fprintf(w, "next: tandem inspect %s; tandem replay %s --target …\n", dir, dir)
}
