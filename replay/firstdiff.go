package replay

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// maxDiffRows bounds the rows read back per side when looking for the
// first differing row.
const maxDiffRows = 100000

// addFirstDiffs runs the read statements of row-content, row-count and
// order-only samples again on the baseline and the target, after the
// replay, and records the first row that differs. Only outcomes are kept
// during the replay (checksums, not rows), so this is what the tables hold
// now; a sample whose rows now agree says so. A target that cannot be
// reached is tried once.
func addFirstDiffs(ctx context.Context, h *histories, an *sqlinfo.Analyzer, base, rn *runner, d *store.Divergences) {
	conns := map[string]*client.Conn{}
	failed := map[string]error{}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	conn := func(rn *runner, schema string) (c *client.Conn, err error) {
		db := rn.schemaFor(schema)
		key := rn.t.Name + "\x00" + db
		if c := conns[key]; c != nil {
			return c, nil
		}
		if err := failed[key]; err != nil {
			return nil, err
		}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if c, err = client.ConnectWithContext(dctx, rn.connCfg.Addr, rn.connCfg.User, rn.connCfg.Password, db, 5*time.Second); err != nil {
			failed[key] = err
			return nil, err
		}
		conns[key] = c
		return c, nil
	}
	for si := range d.Samples {
		s := &d.Samples[si]
		if s.Class != compare.Content && s.Class != compare.RowCount && s.Class != compare.Order {
			continue
		}
		info := an.Info(s.Statement)
		rec, ok, err := h.r.Get(s.Seq)
		if !ok || err != nil || info.Class != sqlinfo.ClassRead || info.Nondeterministic {
			continue
		}
		schema, _, _ := h.before(rec)
		var sides [2][]string
		for k, x := range []*runner{base, rn} {
			c, err := conn(x, schema)
			if err == nil {
				sides[k], err = readRows(c, s.Statement, rec)
			}
			if err != nil {
				s.FirstDiff = fmt.Sprintf("re-running it on %s after the replay failed: %v", x.t.Name, err)
				break
			}
		}
		if s.FirstDiff == "" {
			s.FirstDiff = compare.FirstDiff(sides[0], sides[1], base.t.Name, rn.t.Name, s.Class == compare.Order)
		}
	}
}

// readRows runs a statement (with the record's parameters, if it was an
// execute) and returns its rows as text, at most maxDiffRows of them.
func readRows(c *client.Conn, sql string, rec *store.Record) ([]string, error) {
	var res *mysql.Result
	var err error
	if rec.IsBulk() {
		return nil, errors.New("a bulk execute answers no rows to read again")
	}
	if rec.Kind == store.KindExecute {
		var st *client.Stmt
		if st, err = c.Prepare(sql); err != nil {
			return nil, err
		}
		defer st.Close()
		res, err = st.Execute(args(rec.Params)...)
	} else {
		res, err = c.Execute(sql)
	}
	if err != nil {
		return nil, err
	}
	defer res.Close()
	var rows []string
	if res.Resultset == nil {
		return nil, nil
	}
	for i := range res.Values {
		if i == maxDiffRows {
			break
		}
		var b strings.Builder
		b.WriteByte('(')
		for j := range res.Values[i] {
			if j > 0 {
				b.WriteString(", ")
			}
			v := &res.Values[i][j]
			if v.Value() == nil {
				b.WriteString("NULL")
			} else {
				b.WriteString(v.String())
			}
		}
		b.WriteByte(')')
		rows = append(rows, b.String())
	}
	return rows, nil
}

// args converts captured parameters, for re-running a sample's statement
// with go-mysql (whose decoded rows give the text the sample shows), to the
// Go values go-mysql binds with the same MySQL types: TINY…LONGLONG to int8…int64 (unsigned to uint8…uint64),
// FLOAT and DOUBLE to float32 and float64, temporal values to their text
// form, the rest to bytes.
func args(ps []store.Value) []any {
	out := make([]any, len(ps))
	for i, p := range ps {
		if p.Null {
			continue
		}
		switch p.Type {
		case store.TypeTiny:
			out[i] = pick(p.Unsigned, uint8(p.Int), int8(p.Int))
		case store.TypeShort, store.TypeYear:
			out[i] = pick(p.Unsigned, uint16(p.Int), int16(p.Int))
		case store.TypeLong, store.TypeInt24:
			out[i] = pick(p.Unsigned, uint32(p.Int), int32(p.Int))
		case store.TypeLongLong:
			out[i] = pick(p.Unsigned, uint64(p.Int), p.Int)
		case store.TypeFloat:
			out[i] = float32(p.Float)
		case store.TypeDouble:
			out[i] = p.Float
		case store.TypeDate, store.TypeDateTime, store.TypeTimestamp:
			out[i] = dateTimeText(p.Bytes)
		case store.TypeTime:
			out[i] = timeText(p.Bytes)
		default:
			out[i] = p.Bytes
		}
	}
	return out
}

func pick[U, S any](unsigned bool, u U, s S) any {
	if unsigned {
		return u
	}
	return s
}

// dateTimeText renders a binary-protocol DATE/DATETIME/TIMESTAMP.
func dateTimeText(b []byte) string {
	if len(b) < 4 {
		return "0000-00-00 00:00:00"
	}
	s := fmt.Sprintf("%04d-%02d-%02d", binary.LittleEndian.Uint16(b), b[2], b[3])
	if len(b) >= 7 {
		s += fmt.Sprintf(" %02d:%02d:%02d", b[4], b[5], b[6])
	}
	if len(b) >= 11 {
		s += fmt.Sprintf(".%06d", binary.LittleEndian.Uint32(b[7:]))
	}
	return s
}

// timeText renders a binary-protocol TIME.
func timeText(b []byte) string {
	if len(b) < 8 {
		return "00:00:00"
	}
	sign := ""
	if b[0] == 1 {
		sign = "-"
	}
	h := binary.LittleEndian.Uint32(b[1:])*24 + uint32(b[5])
	s := fmt.Sprintf("%s%02d:%02d:%02d", sign, h, b[6], b[7])
	if len(b) >= 12 {
		s += fmt.Sprintf(".%06d", binary.LittleEndian.Uint32(b[8:]))
	}
	return s
}
