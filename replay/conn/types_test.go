package conn

import (
	"context"
	"net"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// writeLog keeps every byte the client wrote.
type writeLog struct {
	net.Conn
	out []byte
}

func (w *writeLog) Write(p []byte) (int, error) {
	w.out = append(w.out, p...)
	return w.Conn.Write(p)
}

// executes returns the new-params-bound flag of each COM_STMT_EXECUTE of
// one parameter in b, in order.
func executes(t *testing.T, b []byte) []bool {
	t.Helper()
	var flags []bool
	for len(b) >= 4 {
		n := int(b[0]) | int(b[1])<<8 | int(b[2])<<16
		if len(b) < 4+n {
			t.Fatalf("a packet of %d bytes cut at %d", n, len(b)-4)
		}
		p := b[4 : 4+n]
		if len(p) > 0 && p[0] == mysql.COM_STMT_EXECUTE {
			// command, statement id, cursor, iterations, NULL bitmap.
			flags = append(flags, p[1+4+1+4+1] == 1)
		}
		b = b[4+n:]
	}
	return flags
}

// An execute sends its parameters' types when the captured client sent
// them, or when the server does not hold them for the statement on this
// connection: its first execute, other types than the last, the one after
// an error. Before, every execute sent them; libmysqlclient (sysbench) sends
// them once after binding, and the server set up its conversions again for
// each of replay's executes, work it did not do for the captured client.
func TestExecuteSendsTypesOnlyWhenTheServerNeedsThem(t *testing.T) {
	h := sandboxtest.Server(t, "innodb")
	var wl *writeLog
	ctx := context.Background()
	c, err := Dial(ctx, Config{Addr: h.Addr(), User: "root", Caps: DefaultCaps,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			nc, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			wl = &writeLog{Conn: nc}
			return wl, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var r Result
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS types_sent",
		"CREATE TABLE types_sent.t (id BIGINT PRIMARY KEY)",
		"INSERT INTO types_sent.t SELECT seq FROM types_sent.seq_1_to_10",
		"CREATE TABLE types_sent.u (id BIGINT PRIMARY KEY, s VARCHAR(10))",
	} {
		if err := c.Query(ctx, q, &r); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	sel, err := c.Prepare(ctx, "SELECT id FROM types_sent.t WHERE id <= ?")
	if err != nil {
		t.Fatal(err)
	}
	ins, err := c.Prepare(ctx, "INSERT INTO types_sent.u VALUES (?, ?)")
	if err != nil {
		t.Fatal(err)
	}
	long := func(n int64) store.Value { return store.Value{Type: store.TypeLongLong, Int: n} }
	text := func(s string) store.Value { return store.Value{Type: store.TypeVarString, Bytes: []byte(s)} }
	steps := []struct {
		st        *Stmt
		ps        []store.Value
		sendTypes bool
		want      uint64 // the SELECT's rows, the INSERT's error code (0 none)
		sent      bool   // the types went with it
	}{
		{sel, []store.Value{long(1)}, false, 1, true},   // the first execute
		{sel, []store.Value{long(2)}, false, 2, false},  // the same types
		{sel, []store.Value{text("4")}, false, 4, true}, // other types
		{sel, []store.Value{text("9")}, false, 9, false},
		{sel, []store.Value{text("3")}, true, 3, true}, // the captured client sent them
		{sel, []store.Value{long(5)}, false, 5, true},  // back to a number
		{ins, []store.Value{long(1), text("a")}, false, 0, true},
		{ins, []store.Value{long(1), text("b")}, false, mysql.ER_DUP_ENTRY, false},
		{ins, []store.Value{long(2), text("c")}, false, 0, true}, // after an error
		{ins, []store.Value{long(3), text("d")}, false, 0, false},
		{ins, []store.Value{text("4"), long(7)}, false, 0, true},
		{sel, []store.Value{long(7)}, false, 7, false}, // the other statement's executes between
	}
	for i, s := range steps {
		before, r := len(wl.out), Result{}
		err := c.Execute(ctx, s.st, s.ps, 0, s.sendTypes, &r)
		var got uint64
		if s.st == sel {
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			got = r.Rows
		} else if se, ok := err.(*ServerError); ok {
			got = uint64(se.Code)
		} else if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got != s.want {
			t.Errorf("step %d: got %d, want %d", i, got, s.want)
		}
		if flags := executes(t, wl.out[before:]); len(flags) != 1 || flags[0] != s.sent {
			t.Errorf("step %d: new-params-bound %v, want [%v]", i, flags, s.sent)
		}
	}
	// The rows as the values were, whatever their types.
	r = Result{}
	q := "SELECT id FROM types_sent.u WHERE (id, s) IN ((1, 'a'), (2, 'c'), (3, 'd'), (4, '7'))"
	if err := c.Query(ctx, q, &r); err != nil || r.Rows != 4 {
		t.Fatalf("%s: %d rows %v, want 4", q, r.Rows, err)
	}
}
