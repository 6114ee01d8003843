package wire

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
)

func TestBulkExecuteRoundTrip(t *testing.T) {
	types := []ParamType{{Type: mysql.MYSQL_TYPE_LONG}, {Type: mysql.MYSQL_TYPE_VAR_STRING}}
	e := &BulkExecute{StmtID: 7, Flags: BulkSendTypes, Types: types,
		Rows: [][]Param{
			{{ParamType: types[0], Int: 1}, {ParamType: types[1], Bytes: []byte("one")}},
			{{ParamType: types[0], Null: true}, {ParamType: types[1]}},
			{{ParamType: types[0], Int: -3}, {ParamType: types[1], Bytes: []byte{}}},
		},
		Indicator: [][]byte{{BulkNone, BulkNone}, {BulkNull, BulkDefault}, {BulkNone, BulkNone}},
	}
	b := e.Append(nil)
	want := []byte{0xfa, 7, 0, 0, 0, 128, 0, mysql.MYSQL_TYPE_LONG, 0, mysql.MYSQL_TYPE_VAR_STRING, 0,
		0, 1, 0, 0, 0, 0, 3, 'o', 'n', 'e',
		1, 2,
		0, 0xfd, 0xff, 0xff, 0xff, 0, 0}
	if !bytes.Equal(b, want) {
		t.Fatalf("Append = % x\nwant     % x", b, want)
	}
	got, err := ParseBulkExecute(b, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Rows) != 3 || got.Rows[0][0].Int != 1 || string(got.Rows[0][1].Bytes) != "one" || !got.Rows[1][0].Null ||
		got.Indicator[1][1] != BulkDefault || got.Rows[2][0].Int != -3 {
		t.Fatalf("parsed %+v", got)
	}
	if again := got.Append(nil); !bytes.Equal(again, b) {
		t.Fatalf("parse and append changed the command:\n% x\n% x", again, b)
	}
	// Without types: those bound before, or an error that says so.
	noTypes := append([]byte{0xfa, 7, 0, 0, 0, 0, 0}, b[11:]...)
	if _, err := ParseBulkExecute(noTypes, 2, nil); !errors.Is(err, ErrUnknownParamTypes) {
		t.Fatalf("without types and none bound: %v", err)
	}
	if got, err := ParseBulkExecute(noTypes, 2, types); err != nil || len(got.Rows) != 3 {
		t.Fatalf("with types bound before: %v %+v", err, got)
	}
	// A cut row and an unknown indicator are malformed.
	for name, bad := range map[string][]byte{"cut": b[:len(b)-3], "indicator": append(append([]byte{}, b[:11]...), 9, 0)} {
		if _, err := ParseBulkExecute(bad, 2, nil); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

// Packets written through a CompressConn come out of another one as
// they went in: small ones sent as they are, large ones compressed, one
// of more than 16 MiB over several compressed packets; sequence ids
// follow the packets read, and NewCommand starts them again.
func TestCompressConnRoundTrip(t *testing.T) {
	a, b := net.Pipe()
	ca, cb := NewConn(a), NewConn(b)
	if err := ca.Compress(); err != nil {
		t.Fatal(err)
	}
	if err := cb.Compress(); err != nil {
		t.Fatal(err)
	}
	big := []byte(strings.Repeat("tandem ", 3<<20)) // 21 MiB
	payloads := [][]byte{[]byte("hi"), bytes.Repeat([]byte{'x'}, 5000), big}
	done := make(chan error, 1)
	go func() {
		for _, p := range payloads {
			if _, err := ca.WritePacket(0, p); err != nil {
				done <- err
				return
			}
		}
		done <- ca.Flush()
	}()
	for i, want := range payloads {
		_, got, err := cb.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("packet %d: %d bytes back, want %d", i, len(got), len(want))
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The writer's buffer went out as compressed packets 0, 1, …; the
	// reader's next id follows the last it read.
	if ca.CompressedSeq() == 0 || cb.CompressedSeq() != ca.CompressedSeq() {
		t.Fatalf("sequence ids: writer next %d, reader next %d", ca.CompressedSeq(), cb.CompressedSeq())
	}
	ca.NewCommand()
	if ca.CompressedSeq() != 0 {
		t.Fatalf("after NewCommand the next id is %d", ca.CompressedSeq())
	}
	a.Close()
	if _, _, err := cb.ReadPacket(); !errors.Is(err, io.EOF) {
		t.Fatalf("after close: %v", err)
	}
}

// A compressed packet whose payload does not inflate to the length its
// header gives is malformed, not a short read of garbage.
func TestCompressConnRejectsWrongLength(t *testing.T) {
	a, b := net.Pipe()
	cb := NewCompressConn(b)
	go func() {
		var z bytes.Buffer
		w := NewCompressConn(&writerConn{Conn: a, w: &z})
		w.Write(bytes.Repeat([]byte{'y'}, 100))
		p := z.Bytes()
		p[4] = 99 // claims 99 bytes, inflates to 100
		a.Write(p)
		a.Close()
	}()
	buf := make([]byte, 200)
	if _, err := cb.Read(buf); !errors.Is(err, ErrMalformed) {
		t.Fatalf("read: %v, want ErrMalformed", err)
	}
}

// writerConn is a net.Conn whose writes go to w.
type writerConn struct {
	net.Conn
	w io.Writer
}

func (c *writerConn) Write(p []byte) (int, error) { return c.w.Write(p) }
