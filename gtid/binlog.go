package gtid

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"strconv"
	"time"

	gmysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/internal/textclip"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// Account is how to reach a server's binary log: an account with
// REPLICATION SLAVE (and, for the file and offset, BINLOG MONITOR).
type Account struct {
	Addr, User, Password string
	TLS                  *tls.Config
}

// Trx is one transaction of the binary log.
type Trx struct {
	GTID   GTID
	At     time.Time
	Tables []string // schema.name, in the order first written
	// TableRows are the rows changed in each of Tables; Rows their sum.
	TableRows []int64
	Rows      int64
	// Changes are the row images, in order (Between with rows).
	Changes []RowChange
	// Statement: the transaction is a statement (DDL), not row changes,
	// run in StatementSchema.
	Statement, StatementSchema string
	// XA is the xid (sqlinfo.XidKey) of an XA transaction's event group:
	// its XA PREPARE (XAPhase 'p': XA START, its rows, XA END), or the
	// XA COMMIT ('c') or ROLLBACK ('r') of a prepared one, logged apart.
	XA      string
	XAPhase byte
}

// RowChange is one row's change: Insert (After), Update (Before and
// After) or Delete (Before), with every column's value as the binary log
// carries it (binlog_row_image=FULL), in the table's column order.
type RowChange struct {
	Schema, Table string
	Kind          byte // 'i', 'u' or 'd'
	Before, After []any
}

// Between reads the MariaDB binary log's transactions after position from
// up to and including position to, calling each with every transaction
// in commit order. It stops at to, when ctx ends (an error), or when each
// returns false.
func Between(ctx context.Context, acc Account, from, to string, rows bool, each func(Trx) bool) error {
	end, err := ParseList(to)
	if err != nil {
		return err
	}
	start, err := ParseList(from)
	if err != nil {
		return err
	}
	if done(start, end) {
		return nil
	}
	host, portS, err := net.SplitHostPort(acc.Addr)
	if err != nil {
		return fmt.Errorf("gtid: %q: %w", acc.Addr, err)
	}
	port, err := strconv.ParseUint(portS, 10, 16)
	if err != nil {
		return fmt.Errorf("gtid: port of %q: %w", acc.Addr, err)
	}
	set, err := gmysql.ParseMariadbGTIDSet(from)
	if err != nil {
		return fmt.Errorf("%w: %q: %v", ErrSyntax, from, err)
	}
	syncer := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		// A server id no real replica takes; the server lists it in SHOW SLAVE HOSTS.
		ServerID: 0xF0000000 | uint32(os.Getpid()&0xffffff),
		Flavor:   MariaDB, Host: host, Port: uint16(port), User: acc.User, Password: acc.Password,
		TLSConfig: acc.TLS, Logger: slog.New(slog.DiscardHandler), TimestampStringLocation: time.UTC,
		HeartbeatPeriod: time.Second, ReadTimeout: 10 * time.Second, MaxReconnectAttempts: 1,
		DisableRetrySync: true,
	})
	defer syncer.Close()
	stream, err := syncer.StartSyncGTID(set)
	if err != nil {
		return fmt.Errorf("gtid: reading the binary log of %s as %s (it needs REPLICATION SLAVE): %w", acc.Addr, acc.User, err)
	}
	seen := List{}
	for d, g := range start {
		seen[d] = g
	}
	var cur *Trx
	standalone := false
	flush := func() bool {
		if cur == nil {
			return true
		}
		t := *cur
		cur = nil
		seen[t.GTID.Domain] = t.GTID
		return each(t)
	}
	for {
		ev, err := stream.GetEvent(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("gtid: the binary log of %s did not reach %s (read up to %s): %w", acc.Addr, to, seen, err)
			}
			return fmt.Errorf("gtid: reading the binary log of %s: %w", acc.Addr, err)
		}
		switch e := ev.Event.(type) {
		case *replication.MariadbGTIDEvent:
			if !flush() {
				return nil
			}
			if done(seen, end) {
				return nil
			}
			cur = &Trx{GTID: GTID{e.GTID.DomainID, e.GTID.ServerID, e.GTID.SequenceNumber}, At: time.Unix(int64(ev.Header.Timestamp), 0).UTC()}
			// A standalone GTID (DDL) is one Query event; the others end
			// with an Xid event, or a COMMIT query (non-transactional tables).
			standalone = e.Flags&replication.BINLOG_MARIADB_FL_STANDALONE != 0
		case *replication.TableMapEvent:
			if cur != nil {
				cur.addTable(string(e.Schema) + "." + string(e.Table))
			}
		case *replication.RowsEvent:
			if cur != nil {
				n := int64(len(e.Rows))
				kind := byte('i')
				switch ev.Header.EventType {
				case replication.UPDATE_ROWS_EVENTv0, replication.UPDATE_ROWS_EVENTv1, replication.UPDATE_ROWS_EVENTv2,
					replication.MARIADB_UPDATE_ROWS_COMPRESSED_EVENT_V1:
					n /= 2 // before and after images
					kind = 'u'
				case replication.DELETE_ROWS_EVENTv0, replication.DELETE_ROWS_EVENTv1, replication.DELETE_ROWS_EVENTv2,
					replication.MARIADB_DELETE_ROWS_COMPRESSED_EVENT_V1:
					kind = 'd'
				}
				cur.Rows += n
				if e.Table != nil {
					cur.TableRows[cur.addTable(string(e.Table.Schema)+"."+string(e.Table.Table))] += n
					if rows {
						sch, tab := string(e.Table.Schema), string(e.Table.Table)
						for i := 0; i < len(e.Rows); i++ {
							c := RowChange{Schema: sch, Table: tab, Kind: kind}
							switch kind {
							case 'i':
								c.After = e.Rows[i]
							case 'd':
								c.Before = e.Rows[i]
							default:
								if i+1 < len(e.Rows) {
									c.Before, c.After = e.Rows[i], e.Rows[i+1]
								}
								i++
							}
							cur.Changes = append(cur.Changes, c)
						}
					}
				}
			}
		case *replication.QueryEvent:
			if cur == nil {
				continue
			}
			q := string(e.Query)
			if xid, ok := sqlinfo.XidKey(q); ok {
				// XA START and END open and close a prepared group's rows
				// (an XA_PREPARE event ends it); XA COMMIT or ROLLBACK of
				// a prepared transaction is a group of its own.
				cur.XA, cur.XAPhase = xid, 'p'
				switch in := sqlinfo.Analyze(q); {
				case in.XARollback:
					cur.XAPhase = 'r'
				case in.End:
					cur.XAPhase = 'c'
				}
				if standalone && !flush() {
					return nil
				}
				break
			}
			if q != "COMMIT" && q != "ROLLBACK" && q != "BEGIN" {
				cur.addTable(string(e.Schema) + " (statement: " + textclip.Clip(q, 60) + ")")
				cur.Statement, cur.StatementSchema = q, string(e.Schema)
			}
			if standalone || q == "COMMIT" || q == "ROLLBACK" {
				if !flush() {
					return nil
				}
			}
		case *replication.XIDEvent:
			if !flush() {
				return nil
			}
		default:
			if ev.Header.EventType != replication.XA_PREPARE_LOG_EVENT {
				continue
			}
			// The end of an XA PREPARE's group (go-mysql does not parse
			// the event): flushed now, not at the next GTID, which an
			// idle server may never log.
			if !flush() {
				return nil
			}
		}
		if cur == nil && done(seen, end) {
			return nil
		}
	}
}

// addTable returns name's index in Tables, adding it.
func (t *Trx) addTable(name string) int {
	for i, n := range t.Tables {
		if n == name {
			return i
		}
	}
	t.Tables = append(t.Tables, name)
	t.TableRows = append(t.TableRows, 0)
	return len(t.Tables) - 1
}

// done reports whether seen has reached end in every domain.
func done(seen, end List) bool {
	for _, g := range end {
		if !seen.Includes(g) {
			return false
		}
	}
	return true
}

// MaxApplyRows bounds the row changes of bypassed transactions that
// Bypassed keeps to be stored for replay (each holds its row images).
const MaxApplyRows = 2_000_000

// Bypassed lists the binary log's transactions between a capture's start
// and end that are not among captured (the GTIDs the proxy saw commit).
// An error reading the log is kept in the result with what was read.
// With rows, it also returns the transactions with their row images, for
// replay to apply (tandem replay --apply-bypassed), up to MaxApplyRows row
// changes in all: beyond them it returns none, and says so in the
// result's NotApplicable.
func Bypassed(ctx context.Context, acc Account, start, end string, captured map[string]bool, rows bool) (*store.Bypassed, []Trx) {
	b := &store.Bypassed{}
	var trxs []Trx
	kept := 0
	tables := map[string]*store.BypassedTable{}
	prepared := map[string][]string{} // an XA PREPARE's tables, by xid
	err := Between(ctx, acc, start, end, rows, func(t Trx) bool {
		id := t.GTID.String()
		switch t.XAPhase {
		case 'p':
			prepared[t.XA] = t.Tables
		case 'c', 'r':
			// Its writes are its PREPARE's (captured or not): a COMMIT
			// that bypassed the proxy publishes them on their tables.
			t.Tables = prepared[t.XA]
			t.TableRows = make([]int64, len(t.Tables))
			delete(prepared, t.XA)
		}
		if captured[id] {
			return true
		}
		if rows && b.NotApplicable == "" && t.XAPhase != 0 {
			// Its rows are applied at its COMMIT, and not at all after a
			// ROLLBACK, by the xid's server: not as replay applies rows.
			trxs = nil
			b.NotApplicable = "XA transactions (XA PREPARE, COMMIT or ROLLBACK) ran around the proxy; replay cannot apply them as the server did"
		}
		if rows && b.NotApplicable == "" {
			if kept += len(t.Changes); kept > MaxApplyRows {
				trxs = nil
				b.NotApplicable = fmt.Sprintf("they changed more than %d rows, more than the proxy keeps in memory to store them", MaxApplyRows)
			} else {
				trxs = append(trxs, t)
			}
		}
		t.Changes = nil
		b.Transactions++
		b.Rows += t.Rows
		if len(b.First) < store.MaxBypassedListed {
			b.First = append(b.First, store.BypassedTrx{GTID: id, At: t.At, Tables: t.Tables, Rows: t.Rows})
		}
		for i, name := range t.Tables {
			bt := tables[name]
			if bt == nil {
				bt = &store.BypassedTable{Table: name, FirstGTID: id}
				tables[name] = bt
			}
			bt.Transactions++
			bt.Rows += t.TableRows[i]
		}
		return true
	})
	if err != nil {
		b.Error = err.Error()
	}
	for _, bt := range tables {
		b.Tables = append(b.Tables, *bt)
	}
	sort.Slice(b.Tables, func(i, j int) bool { return b.Tables[i].Table < b.Tables[j].Table })
	return b, trxs
}

// BypassedTables lists the tables a capture's binary-log check (Bypassed)
// found written around the proxy, each with its first such write's place
// in the server's order, for compare.PlaceBypassed.
func BypassedTables(b *store.Bypassed) []compare.BypassedTable {
	if b == nil {
		return nil
	}
	var out []compare.BypassedTable
	for _, t := range b.Tables {
		if g, err := ParseGTID(t.FirstGTID); err == nil {
			out = append(out, compare.BypassedTable{Table: t.Table, GTID: t.FirstGTID, Domain: g.Domain, Seq: g.Seq, Transactions: t.Transactions})
		}
	}
	return out
}
