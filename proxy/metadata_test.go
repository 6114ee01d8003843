package proxy

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

// MariaDB's metadata caching stays negotiated through the proxy: executes
// of a prepared statement come without column definitions, with and without
// CLIENT_DEPRECATE_EOF, and the client sees exactly what it sees directly.
func TestCacheMetadataExecutes(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	db, _ := srv.FreshDB(t)
	var name string
	if err := db.QueryRow("SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	exec := func(q string) {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	exec("CREATE TABLE t (id INT PRIMARY KEY, c VARCHAR(10))")
	exec("INSERT INTO t VALUES (1, 'one'), (3, 'three')")

	// session runs a prepare and four executes (ids 1, 1, 2, 3) and returns
	// every packet the client received, in order.
	session := func(addr string, caps uint64) [][]byte {
		c := dialRawCaps(t, addr, "root", name, caps)
		var got [][]byte
		read := func() []byte {
			_, p, err := c.ReadPacket()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, p)
			return p
		}
		c.send(t, 0, append([]byte{mysql.COM_STMT_PREPARE}, "SELECT c FROM t WHERE id = ?"...))
		pok, err := wire.ParsePrepareOK(read())
		if err != nil {
			t.Fatal(err)
		}
		n := int(pok.Params) + int(pok.Columns)
		if caps&uint64(mysql.CLIENT_DEPRECATE_EOF) == 0 {
			n += 2
		}
		for range n {
			read()
		}
		for _, id := range []uint32{1, 1, 2, 3} {
			ex := wire.Execute{StmtID: pok.StmtID, Iterations: 1, NewParamsBound: true, Types: []wire.ParamType{{Type: mysql.MYSQL_TYPE_LONG}},
				Params: []wire.Param{{ParamType: wire.ParamType{Type: mysql.MYSQL_TYPE_LONG}, Int: int64(id)}}}
			c.send(t, 0, ex.Append(nil))
			if _, metadata, err := wire.ParseColumnCount(read(), true); err != nil || metadata {
				t.Fatalf("column count: metadata %v, %v; want definitions skipped", metadata, err)
			}
			if caps&uint64(mysql.CLIENT_DEPRECATE_EOF) == 0 {
				read() // the EOF after the (skipped) definitions stays
			}
			for {
				if p := read(); p[0] == wire.HeaderEOF && len(p) < 9 {
					break
				}
			}
		}
		c.send(t, 0, []byte{mysql.COM_QUIT})
		return got
	}
	for _, deprecateEOF := range []bool{true, false} {
		t.Run(fmt.Sprint("deprecate_eof=", deprecateEOF), func(t *testing.T) {
			caps := rawCaps&^uint64(mysql.CLIENT_LONG_PASSWORD) | wire.MariaDBClientCacheMetadata // MariaDB client: extended caps
			if !deprecateEOF {
				caps &^= uint64(mysql.CLIENT_DEPRECATE_EOF)
			}
			direct := session(srv.Addr(), caps)
			tp := startProxy(t, srv.Addr(), true, func(c *Config) { c.CaptureResults = ResultsChecksum })
			via := session(tp.Addr().String(), caps)
			if len(via) != len(direct) {
				t.Fatalf("through the proxy %d packets, directly %d", len(via), len(direct))
			}
			copy(via[0][1:5], direct[0][1:5]) // the prepare-OK's statement id is the server's count
			for i := range direct {
				if !bytes.Equal(via[i], direct[i]) {
					t.Errorf("packet %d: through the proxy %x, directly %x", i, via[i], direct[i])
				}
			}
			var rows []uint64
			for _, r := range tp.records(t) {
				if r.Kind == store.KindExecute {
					if r.Resp.Kind != store.RespResultSet || r.Resp.Columns != 1 || !r.Resp.HasChecksums {
						t.Errorf("execute response %+v", r.Resp)
					}
					rows = append(rows, r.Resp.Rows)
				}
			}
			if fmt.Sprint(rows) != "[1 1 0 1]" {
				t.Errorf("captured rows per execute %v, want [1 1 0 1]", rows)
			}
		})
	}
}

func dialRawCaps(t *testing.T, addr, user, db string, caps uint64) *rawClient {
	t.Helper()
	save := rawCapsOverride
	rawCapsOverride = caps
	defer func() { rawCapsOverride = save }()
	return dialRaw(t, addr, user, db)
}
