// Package store is Tandem's on-disk format: the capture log that proxy and
// synth write and replay reads. This comment is the format's specification.
//
// # Directory
//
// A capture is a Pebble (github.com/cockroachdb/pebble/v2) database in a
// directory of its own, with zstd-compressed blocks. Everything Tandem
// writes is under the keys below; the first byte of a key is its prefix.
//
// # Keys
//
//	0x00 "header"                         JSON Meta; written when the capture is created
//	0x00 "summary"                        JSON Summary; written by a clean Close
//	0x01 ...                              reserved (never written to a capture; see Runs)
//	0x02 seq:u64be                        one record, value as below
//	0x03 session:u64be firstSeq:u64be     session index: the seqs of session's records in one commit
//	0x04 firstSeq:u64be                   time index: one commit's seq range and start-time range
//	0x05 seq:u64be                        the GTID the server gave the transaction record seq committed (string)
//
// Records are keyed by their global sequence (1, 2, 3, …, big-endian, so key
// order is sequence order). The Writer assigns sequences in append order;
// a capture's sequences are contiguous except where a commit was lost in a
// crash after its sequences were handed out (never within a commit).
//
// Session index value: uvarint n, then n uvarint deltas: the first from
// firstSeq-1, each next from the previous seq. It lists, in order, the
// session's records that the same commit (batch) wrote.
//
// Time index value: uvarint count (records in the commit, seqs firstSeq …
// firstSeq+count-1), varint minStart, varint maxStart (nanoseconds relative
// to Meta.BaseTime) of those records.
//
// A cleanly closed capture has a summary and no write-ahead log files:
// Close flushes every record into SSTables, then removes the logs. A capture
// whose writer died keeps its logs, and Pebble replays them when it is
// opened; it has no summary.
//
// Commit GTIDs (0x05) are written when the proxy follows the backend's
// binary log (tandem proxy --binlog-user): for a record that ended a
// transaction which wrote, the server's @@last_gtid for it, so that the
// capture knows each captured commit's place in the server's own order.
// Meta.Start and Summary.End are then the server's positions when the
// capture began and ended, and Summary.Bypassed lists the transactions the
// server's binary log holds between them that did not pass through the
// proxy. A reader that does not know these keys and fields reads the
// capture as before.
//
// Index entries are written in the same Pebble batch as the records they
// describe, so they are exactly as durable as the records.
//
// # Record value (record format version 2)
//
//	byte     record version (2; version 1 lacks fields 11 and 12 and the long-data bit)
//	byte     Kind
//	uvarint  presence mask of the optional fields (bit i set: field i follows)
//	uvarint  session id
//	varint   start, nanoseconds relative to Meta.BaseTime
//	uvarint  duration, nanoseconds
//	optional fields in bit order: 0 schema (string), 1 SQL (string),
//	  2 statement id (uvarint), 3 params (uvarint count, then values),
//	  4 cursor type (byte), 5 param index (uvarint), 6 fetch rows (uvarint),
//	  7 data (bytes), 8 user (string), 9 command (byte), 10 flags (uvarint),
//	  11 client capabilities (uvarint), 12 collation (byte)
//	  (flags: the Flag* bits of record.go. Bits 4-6 mark the records of a
//	  capture started on a running proxy: FlagOpenAtStart, the synthetic
//	  records that rebuild a session open at its start; FlagBeforeStart, the
//	  records of a transaction open then; FlagOpenAtStop, the synthetic end
//	  of a session open at its stop. A reader that does not know them
//	  replays such records as ordinary ones, which is what they are for.
//	  Bits 7-8 are a packet capture's: FlagLost, bytes lost from a
//	  session (a not-replayable KindOther record); FlagAnswerLost, a
//	  command whose answer was not seen whole (its response is none).)
//	response:
//	  byte RespKind; for RespNone nothing follows; otherwise
//	  uvarint presence mask, then in bit order: 0 affected rows, 1 insert id,
//	  2 status, 3 warnings, 4 error code (uvarints), 5 SQL state, 6 message
//	  (strings), 7 columns, 8 params, 9 rows, 10 bytes (uvarints),
//	  11 checksums (ordered, unordered: u64le each), 12 more results
//	  (uvarint count, then that many responses without more results).
//
// A string or bytes field is a uvarint length and the bytes. A value
// (parameter) is a header byte (bit 0 NULL, bit 1 unsigned, bit 2 sent as
// long data: its value is in the session's long-data records), the MySQL type
// byte, then nothing for NULL; for integer types (TINY, SHORT, LONG,
// LONGLONG, INT24, YEAR) a varint, or a uvarint when unsigned; FLOAT four
// bytes and DOUBLE eight (IEEE 754, little endian); anything else as bytes
// (temporal types in their binary-protocol form).
//
// Reader and Writer check every number that says how much follows against
// what is left, so a corrupt value is an ErrCorrupt, never a panic or a huge
// allocation.
//
// # Versions
//
// Meta.FormatVersion is the capture format; FormatVersion below is what this
// code writes and the newest it reads. Each record value starts with its own
// version byte. Both are part of the format and never change meaning: a new
// layout gets a new number, and older numbers stay readable.
// testdata/capture-v1 is a capture written by the version 1 writer; a test
// decodes it to spelled-out values.
//
// # Runs
//
// A run directory is what `tandem replay --run DIR` (and sweep) writes and
// `tandem report` reads: a Pebble store of its own, run format version
// RunFormatVersion (RunMeta.RunFormat), never written to a capture. Keys,
// part of the run format:
//
//	0x00 "header"                                   JSON RunMeta, written when the run is created
//	0x00 "end"                                      JSON RunEnd, written when it ends (absent: it did not finish)
//	0x01 point:u16be target:u8 seq:u64be            one record's Outcome on a target
//	0x02 point:u16be target:u8 series:u8 name       a latency histogram (Series; name is the digest ID for SeriesDigest, else empty)
//	0x03 point:u16be target:u8                      JSON TargetResult: counters, divergences with samples, end state
//	0x04 point:u16be target:u8 n:u32be              Interval n of the target's series
//	0x05 digest-id                                  JSON DigestInfo: a digest's normalized text and class
//	0x06 point:u16be                                JSON Point: one replay of the run (a sweep has one per thread count)
//
// target is the index of the target in RunMeta.Targets. An outcome's seq is
// the record's sequence in the capture with the pass over it (--loop) in the
// top 24 bits (OutcomeSeq). JSON field names are part of the format.
//
// Outcome value (outcome version 1): byte version (1), uvarint flags (the
// Outcome* bits), then uvarints session, service ns, lag ns, error code,
// results, affected rows, insert id, warnings, rows, columns; then u64le
// ordered and unordered row checksums; then a cause byte if the flags have
// OutcomeClientError, then a skip reason byte if they have OutcomeSkipped.
//
// Histogram value (histogram version 1): byte version (1), uvarints count,
// sum (ns), min (ns), max (ns), n (non-empty buckets), then n pairs of
// uvarints: the bucket index's distance from the previous index plus one
// (the first from -1), and the bucket's count. Bucket indexes are
// latency.Index's (HdrHistogram's layout at two significant digits,
// nanoseconds); the counts add up to count.
//
// Interval value (interval version 1): byte version (1), uvarints start and
// length (ns from the run's start), transactions, reads, writes, other,
// errors, deadlocks, retries, threads; then a histogram value.
//
// Run format 2 adds the outcome flag OutcomeTrxFailed (bit 10) and the skip
// reason SkipTrxFailed (9), the results' failed transactions
// (failed_transactions, failed_transactions_by_code, failures), reexecuted,
// an end-state table's "because", and a target's "tls"; its error counts count every failed
// run of a statement, not only each record's first. A format 1 run reads
// as before.
//
// Later additions that need no new run format (older runs read as before,
// and older readers ignore them): RunMeta's capture_sessions, the counts of
// sessions open at the capture's start and stop; a comparison with the
// capture's open_at_start and open_at_start_failed (synthetic records run,
// not compared); and the order-ambiguous reason "started-before-capture"
// (order_ambiguous_by_reason is keyed by the reason's name, never a
// number).
//
// testdata/run-v1 is a run written by the version 1 writer; a test decodes
// it to spelled-out values.
//
// # Encryption
//
// A capture, a run directory or a shadow's copy of the feed written with
// a key (WriterOptions.Key, CreateRun's WithKey; tandem's
// --encrypt-key-file) is encrypted at rest, file by file, beneath Pebble
// (cryptFS, crypt.go): every file Pebble writes — tables, logs, the
// manifest, OPTIONS, its marker files — is sealed, so the keys and values
// above are never on disk in clear. Authenticated encryption: a changed
// byte, a block moved within a file or between files, is found when read
// (ErrCorrupt, naming the file, as a checksum failure in clear is), never
// decrypted into something else. Part of the format, never change:
//
//	header (4096 bytes): "TANDEMcr", byte format version (1), byte cipher
//	  (1: AES-256-GCM), 2 zero bytes, u32le page size (4096), 32 bytes of
//	  salt (random, per file), 16 bytes of key check
//	  (HMAC-SHA256(key, "tandem key check v1\x00" || salt), first 16
//	  bytes), zeros to 4096
//	then blocks, one per 4096 bytes: u16le n (1..4066, the plaintext
//	  length), 12 bytes of nonce, n bytes of ciphertext, 16 bytes of GCM
//	  tag, zeros to 4096
//
// Block i holds plaintext bytes [4066·i, 4066·i+n); every block but the
// last holds 4066. A file's AES-256 key is HKDF-SHA256(key, salt, "tandem
// file key v1"): no two files share one, so a block cannot be moved from
// one file to another, and the additional data of block i (u64le i, u16le
// n) pins it to its place in its file. Each write of a block — a log's
// partial last block is written again as the log grows — takes a new
// random nonce, so no nonce repeats under a file's key (well within
// GCM's bound for random nonces, 2^32 writes, for files of any size
// Pebble makes). A file's plaintext size is its blocks' (Stat). A
// recycled log is not reused but made anew (cryptFS.ReuseForWrite).
//
// The key check tells the right key from another at open (ErrWrongKey)
// without a byte decrypted; a store opened without a key that is
// encrypted is refused (ErrNoKey); both say so in one line. A store in
// clear opened with a key opens as it is: the key is for the stores that
// are encrypted. Meta.Encryption says a capture is encrypted; the key is
// never stored. Beside Pebble's files a capture holds files that are not
// encrypted and hold nothing of the traffic: LOCK (empty), the reserved
// space (blanks) and its failure note (why the writer failed: an error
// and a time).
//
// A crash mid-write leaves at most the block being written torn: a last
// block that does not open is the end of the file for a log read in
// order (Pebble reads a torn tail in clear the same way: the batch cut
// short is dropped, what was synced before it is there); anywhere else,
// or in a table, it is damage. The last block is written again as it
// grows: the one case where a crash of the machine (not of the process)
// could lose bytes synced before is a device that tears a single aligned
// 4096-byte write.
//
// # Concurrency
//
// A Writer's Append and TryAppend are safe for concurrent use. A Reader is
// safe for concurrent use; each iteration has its own Pebble iterator. A
// directory has at most one Writer (Pebble's lock file enforces it).
package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// FormatVersion is the capture format this package writes and the newest
// it reads. Part of the format: bump it for any incompatible change.
const FormatVersion = 3

// Key prefixes. Part of the format, never change.
const (
	prefixMeta    byte = 0x00
	prefixRun     byte = 0x01
	prefixRecord  byte = 0x02
	prefixSession byte = 0x03
	prefixTime    byte = 0x04
	prefixGTID    byte = 0x05
)

var (
	keyHeader  = []byte("\x00header")
	keySummary = []byte("\x00summary")
)

// Sentinel errors; test with errors.Is.
var (
	ErrNotCapture  = errors.New("store: not a tandem capture")
	ErrNewerFormat = errors.New("store: newer format")
	ErrCorrupt     = errors.New("store: corrupt")
	ErrExists      = errors.New("store: directory not empty") // a capture's or a run's
	ErrClosed      = errors.New("store: writer closed")
	// ErrStopped: the capture stopped recording (its budget, or the
	// disk's free-space floor); relaying goes on.
	ErrStopped = errors.New("store: capture stopped")
	// ErrBudget: it stopped at its size budget (WriterOptions.MaxBytes),
	// with ErrStopped; without it, the disk's free-space floor stopped it.
	ErrBudget = errors.New("store: capture budget reached")
	// ErrFailed: the capture store could not write (a full disk, its
	// directory removed or made read-only) and stopped recording; relaying
	// goes on, and what was synced before is readable once the process
	// that wrote it has ended.
	ErrFailed = errors.New("store: capture failed")
)

// Meta describes a capture. Its JSON field names are part of the format.
type Meta struct {
	Magic         string    `json:"magic"` // always "tandem-capture"
	FormatVersion int       `json:"format_version"`
	CreatedAt     time.Time `json:"created_at"`
	// BaseTime is the origin of the records' start times, Unix nanoseconds.
	BaseTime int64 `json:"base_time_ns"`
	// Source says what wrote the capture, e.g. "proxy 127.0.0.1:4000 -> 127.0.0.1:3306".
	Source      string `json:"source"`
	ToolVersion string `json:"tool_version"`
	// Start is the backend's position when the capture began (nil: it
	// was not asked for, tandem proxy --binlog-user).
	Start *Position `json:"start,omitempty"`
	// Encryption names the cipher the capture is encrypted with at rest
	// ("AES-256-GCM"; empty: in clear). The key is never stored.
	Encryption string `json:"encryption,omitempty"`
	// Origin says what the records were read from when that was not a
	// proxy relaying the traffic (nil: a proxy, which sees everything).
	Origin *Origin `json:"origin,omitempty"`
}

// Origin is where a capture taken without a proxy was read from, and what
// that source cannot know. JSON field names are part of the format.
type Origin struct {
	// Kind is OriginPcap, OriginInterface or a server log's.
	Kind string `json:"kind"`
	// Inputs are the files read (or the interface).
	Inputs []string `json:"inputs,omitempty"`
	// Ports are the server ports whose connections were read.
	Ports []int `json:"ports,omitempty"`
	// NoResults: the source holds no answers, so replay compares targets
	// with each other only.
	NoResults bool `json:"no_results,omitempty"`
	// TimePrecision is how precise the records' times are (0: as precise
	// as the clock that stamped them; a log's whole seconds: 1 s).
	TimePrecision time.Duration `json:"time_precision_ns,omitempty"`
}

// Origin kinds.
const (
	OriginPcap      = "pcap"
	OriginInterface = "interface"
)

// SourceStats is what reading a source without a proxy met that a proxy
// never does, each with a count and a sample. JSON field names are part
// of the format.
type SourceStats struct {
	// Packets read, and those skipped: not TCP to or from a server port,
	// fragments, link types not read.
	Packets        uint64 `json:"packets"`
	PacketsSkipped uint64 `json:"packets_skipped"`
	// Sessions read; FoundOpen of them began before the capture (no
	// login seen): recorded from the first command after which no
	// transaction was open, with a synthetic connect; Unjoined of those
	// never reached such a point (nothing recorded).
	Sessions  uint64 `json:"sessions"`
	FoundOpen uint64 `json:"found_open,omitempty"`
	Unjoined  uint64 `json:"unjoined,omitempty"`
	// CommandsBeforeJoin are commands of sessions found open, read before
	// they joined (not recorded).
	CommandsBeforeJoin uint64 `json:"commands_before_join,omitempty"`
	// TLS sessions cannot be read: counted and skipped.
	TLS uint64 `json:"tls,omitempty"`
	// Gaps are bytes a session's stream lost (GapBytes in all); each is a
	// FlagLost record, or a FlagAnswerLost one when only an answer lost
	// bytes.
	Gaps     uint64 `json:"gaps,omitempty"`
	GapBytes uint64 `json:"gap_bytes,omitempty"`
	// AnswersLost counts the commands recorded with FlagAnswerLost.
	AnswersLost uint64 `json:"answers_lost,omitempty"`
	// UnknownStatements counts executes of statements prepared before the
	// capture saw the session (replay skips them).
	UnknownStatements uint64 `json:"unknown_statements,omitempty"`
	// Undecoded counts sessions whose conversation could not be followed
	// (an answer that does not parse; capabilities the reader does not
	// follow): recorded up to there.
	Undecoded uint64 `json:"undecoded,omitempty"`
	// Retransmitted counts segments whose bytes were all seen before: TCP
	// retransmissions, or packets the capture holds twice (tcpdump -i any
	// sees loopback traffic going out and coming in).
	Retransmitted uint64 `json:"retransmitted,omitempty"`
	// StrayPackets are server packets that came when no answer was
	// expected (ignored).
	StrayPackets uint64 `json:"stray_packets,omitempty"`
	// Server logs: Untimed entries came before the log's first time (a
	// file cut from a longer log) and were given it; TimeBack entries
	// of a whole-second log were stamped more than a second before the
	// one before them (a change of clock, files out of order) and taken
	// as of the later time; Truncated statements were as long as the
	// log writes any (the audit log's limit) and are not replayed;
	// FailedPrepares are prepares the audit log wrote because they
	// failed (not replayed).
	// Gaps, for a log, count the times it was opened again without a
	// FLUSH of the logs before (a restart, or logging off for a while).
	Untimed        uint64 `json:"untimed,omitempty"`
	TimeBack       uint64 `json:"time_back,omitempty"`
	Truncated      uint64 `json:"truncated,omitempty"`
	FailedPrepares uint64 `json:"failed_prepares,omitempty"`
	// SchemaUnknown counts statements of sessions found open whose schema
	// neither the source nor --schema says (store.FlagSchemaUnknown: not
	// replayed).
	SchemaUnknown uint64 `json:"schema_unknown,omitempty"`
	// Samples has one example of each kind counted (by the JSON name).
	Samples map[string]string `json:"samples,omitempty"`
}

// Position is a server's place in its own history: its identity and the
// GTIDs it had written to its binary log. A target holds a capture's
// start state when it has applied exactly Start.GTID. JSON field names are
// part of the format.
type Position struct {
	// Flavor is "mariadb" or "mysql": how GTID reads.
	Flavor   string `json:"flavor"`
	ServerID uint32 `json:"server_id"`
	// ServerUUID is MySQL's server identity (MariaDB has none).
	ServerUUID string `json:"server_uuid,omitempty"`
	Version    string `json:"version"`
	// GTID is the server's GTID position: MariaDB's @@gtid_binlog_pos
	// (domain-server-seq, one per domain) or MySQL's @@gtid_executed.
	GTID string `json:"gtid"`
	// BinlogFile and BinlogPos are SHOW MASTER STATUS's, for the record.
	BinlogFile string `json:"binlog_file,omitempty"`
	BinlogPos  uint64 `json:"binlog_pos,omitempty"`
	// At is just before the GTIDs were asked for: every transaction
	// after GTID committed after At (replay places the writes that
	// bypassed the proxy by it).
	At time.Time `json:"at"`
}

// Bypassed is what the server's binary log holds between a capture's
// start and end that the capture does not: transactions another client
// sent to the server directly (a cron job, an admin session, a second
// application). JSON field names are part of the format.
type Bypassed struct {
	// Transactions and Rows count them and the rows they changed.
	Transactions int   `json:"transactions"`
	Rows         int64 `json:"rows"`
	// Tables are the tables they wrote, each with its counts.
	Tables []BypassedTable `json:"tables,omitempty"`
	// First lists the first of them (at most MaxBypassedListed).
	First []BypassedTrx `json:"first,omitempty"`
	// Error says why the binary log could not be read to the end (the
	// counts are then what was read).
	Error string `json:"error,omitempty"`
	// Applicable counts the transactions stored as records (key 0x06),
	// rebuilt from their row images, for replay --apply-bypassed;
	// NotApplicable says why the others are not.
	Applicable    int    `json:"applicable,omitempty"`
	NotApplicable string `json:"not_applicable,omitempty"`
	// Unasked counts captured transactions that wrote whose GTID the proxy
	// could not ask for (a DDL statement committed them implicitly; the
	// client's next statement read the diagnostics and wrote; the backend
	// went away first): up to this many of the listed transactions may
	// have passed through the proxy after all.
	Unasked int `json:"unasked,omitempty"`
}

// MaxBypassedListed bounds Bypassed.First.
const MaxBypassedListed = 100

// BypassedTable is one table's share of the bypassed writes.
type BypassedTable struct {
	Table        string `json:"table"` // schema.name on the captured server
	Transactions int    `json:"transactions"`
	Rows         int64  `json:"rows"`
	// FirstGTID is the first bypassed transaction that wrote it.
	FirstGTID string `json:"first_gtid"`
}

// BypassedTrx is one transaction that bypassed the proxy.
type BypassedTrx struct {
	GTID   string    `json:"gtid"`
	At     time.Time `json:"at"`
	Tables []string  `json:"tables"`
	Rows   int64     `json:"rows"`
}

const magic = "tandem-capture"

// Summary is written by a clean Close. Its JSON field names are part of the format.
type Summary struct {
	Records  uint64    `json:"records"`
	FirstSeq uint64    `json:"first_seq"`
	LastSeq  uint64    `json:"last_seq"`
	Sessions uint64    `json:"sessions"`
	Dropped  uint64    `json:"dropped"`
	ClosedAt time.Time `json:"closed_at"`
	// Stopped says why the capture stopped recording before it was closed
	// (its budget, the disk's free-space floor), and StoppedAt when.
	Stopped   string    `json:"stopped,omitempty"`
	StoppedAt time.Time `json:"stopped_at,omitzero"`
	// End is the backend's position when the capture ended, after its
	// last session (nil when Meta.Start is); Commits counts the captured
	// transactions whose GTID the capture holds, and Bypassed lists the
	// binary log's transactions in between that are not among them.
	End      *Position `json:"end,omitempty"`
	Commits  uint64    `json:"commits,omitempty"`
	Bypassed *Bypassed `json:"bypassed,omitempty"`
	// Sealed says why a writer did not close the capture (it was killed,
	// or failed) when Seal wrote this summary after reading every record,
	// and SealedAt when; Lost lists the records missing then (SeqGaps).
	// Dropped is then unknown (counted 0), and End absent.
	Sealed   string    `json:"sealed,omitempty"`
	SealedAt time.Time `json:"sealed_at,omitzero"`
	Lost     string    `json:"lost,omitempty"`
	// Source is what reading a source without a proxy met (Meta.Origin).
	Source *SourceStats `json:"source,omitempty"`
}

// failedFile, next to the store's files, says why a writer abandoned the
// capture (Writer.fail). The note is written into reservedFile, which
// Create fills with failedFileSize spaces so that the note fits in blocks
// already allocated when the disk is full, and reservedFile is then
// renamed failedFile (a rename takes no data blocks); if the rename fails
// the note stays in reservedFile, where readers look too. A clean Close
// removes both. (A writer that ran before the two names held its note, or
// its spaces, in failedFile.)
const (
	failedFile     = "TANDEM-FAILURE"
	reservedFile   = "TANDEM-RESERVED-SPACE"
	failedFileSize = 4096
)

type failure struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

func recordKey(dst []byte, seq uint64) []byte {
	dst = append(dst, prefixRecord)
	return binary.BigEndian.AppendUint64(dst, seq)
}

func sessionKey(dst []byte, session, firstSeq uint64) []byte {
	dst = append(dst, prefixSession)
	dst = binary.BigEndian.AppendUint64(dst, session)
	return binary.BigEndian.AppendUint64(dst, firstSeq)
}

func gtidKey(dst []byte, seq uint64) []byte {
	dst = append(dst, prefixGTID)
	return binary.BigEndian.AppendUint64(dst, seq)
}

func timeKey(dst []byte, firstSeq uint64) []byte {
	dst = append(dst, prefixTime)
	return binary.BigEndian.AppendUint64(dst, firstSeq)
}

// Lines says in a few lines what the stats hold, each count with its
// example (tandem capture's output, tandem inspect), for a source of
// Origin kind kind.
func (st *SourceStats) Lines(kind string) []string {
	packets := kind == OriginPcap || kind == OriginInterface
	var out []string
	if packets {
		out = append(out, fmt.Sprintf("%d packets read (%d not MySQL traffic to the server ports), %d sessions", st.Packets, st.PacketsSkipped, st.Sessions))
	} else {
		out = append(out, fmt.Sprintf("%d lines read, %d sessions", st.Packets, st.Sessions))
	}
	add := func(n uint64, kind, what string) {
		if n == 0 {
			return
		}
		line := fmt.Sprintf("%d %s", n, what)
		if s := st.Samples[kind]; s != "" {
			line += "; e.g. " + s
		}
		out = append(out, line)
	}
	if packets {
		add(st.FoundOpen, "found_open", "sessions began before the capture (no login seen): recorded from their first point outside a transaction")
	} else {
		add(st.FoundOpen, "found_open", "sessions have no connect in the log (they began before it): a synthetic connect each, in the schema the log names (or --schema's)")
		add(st.SchemaUnknown, "schema_unknown", "statements of such sessions in a schema the log does not say, before they named one: not replayed (give --schema)")
		add(st.Undecoded, "undecoded", "logins or changes of user the server refused (not replayed)")
		add(st.Gaps, "gaps", "times the log was opened again, not by a FLUSH of the logs (the server restarted, or logging was off): the sessions open then end there, and what they did meanwhile is not in the log")
		add(st.Untimed, "untimed", "entries before the log's first time, given that time")
		add(st.TimeBack, "time_back", "entries stamped more than a second before the one before them (a clock change, files out of order?), taken as of the later time")
		add(st.Truncated, "truncated", "statements as long as the log writes any (server_audit_query_log_limit: --audit-query-limit), perhaps cut: not replayed")
		add(st.FailedPrepares, "failed_prepares", "prepares the server refused, logged with their ? marks (not replayed)")
		return out
	}
	add(st.Unjoined, "unjoined", "of them never reached such a point: nothing of them recorded")
	add(st.CommandsBeforeJoin, "", "commands of such sessions came before that point (not recorded; any that changed rows is one lost-commands record)")
	add(st.SchemaUnknown, "schema_unknown", "statements of such sessions before they named a schema (none given with --schema): not replayed")
	add(st.UnknownStatements, "unknown_statements", "executes of statements prepared before the capture (replay skips them)")
	add(st.TLS, "tls", "TLS sessions (encrypted: not read)")
	add(st.Gaps, "gaps", fmt.Sprintf("gaps in sessions' streams (%d bytes lost)", st.GapBytes))
	add(st.AnswersLost, "answers_lost", "answers not seen whole (compared between targets only)")
	add(st.Undecoded, "undecoded", "sessions not followed to their end")
	add(st.StrayPackets, "", "server packets outside any answer (ignored)")
	add(st.Retransmitted, "", "segments seen twice (TCP retransmissions, or a capture that holds packets twice: read once)")
	return out
}
