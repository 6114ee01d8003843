// Package gtid reads where a server is in its history and compares
// positions: the capture's start and end points (the backend's GTID
// position when a capture began and ended), a target's applied position
// (is it exactly at the capture's start?), and the binary log's
// transactions between two points (which of them did not pass through the
// proxy).
//
// MariaDB positions are GTID lists, one domain-server-seq per replication
// domain (@@gtid_binlog_pos, @@gtid_slave_pos); with gtid_strict_mode a
// domain's sequence numbers only grow, so two positions in one domain
// differ by exactly the difference of their sequence numbers. MySQL
// positions are GTID sets (@@gtid_executed), compared as sets.
package gtid

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	gmysql "github.com/go-mysql-org/go-mysql/mysql"
)

// Flavors of GTID.
const (
	MariaDB = "mariadb"
	MySQL   = "mysql"
)

// ErrSyntax: a position that does not parse.
var ErrSyntax = errors.New("gtid: not a GTID position")

// A MariaDB GTID: domain-server-seq.
type GTID struct {
	Domain, Server uint32
	Seq            uint64
}

func (g GTID) String() string { return fmt.Sprintf("%d-%d-%d", g.Domain, g.Server, g.Seq) }

// ParseGTID parses one MariaDB GTID.
func ParseGTID(s string) (GTID, error) {
	p := strings.Split(strings.TrimSpace(s), "-")
	if len(p) != 3 {
		return GTID{}, fmt.Errorf("%w: %q (want domain-server-seq, as 0-1-42)", ErrSyntax, s)
	}
	d, err1 := strconv.ParseUint(p[0], 10, 32)
	sv, err2 := strconv.ParseUint(p[1], 10, 32)
	n, err3 := strconv.ParseUint(p[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return GTID{}, fmt.Errorf("%w: %q (want domain-server-seq, as 0-1-42)", ErrSyntax, s)
	}
	return GTID{uint32(d), uint32(sv), n}, nil
}

// List is a MariaDB GTID position: the last GTID of each domain.
type List map[uint32]GTID

// ParseList parses a MariaDB position ("0-1-42,1-2-7"; "" is the empty
// position of a server that has written nothing).
func ParseList(s string) (List, error) {
	l := List{}
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		g, err := ParseGTID(part)
		if err != nil {
			return nil, err
		}
		if _, dup := l[g.Domain]; dup {
			return nil, fmt.Errorf("%w: %q names domain %d twice", ErrSyntax, s, g.Domain)
		}
		l[g.Domain] = g
	}
	return l, nil
}

func (l List) String() string {
	ds := make([]uint32, 0, len(l))
	for d := range l {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = l[d].String()
	}
	return strings.Join(parts, ",")
}

// Includes reports whether g is at or before l's position in g's domain
// (a server at l has applied g).
func (l List) Includes(g GTID) bool {
	h, ok := l[g.Domain]
	return ok && h.Seq >= g.Seq
}

// Diff is how a position (have) stands against another (want).
type Diff struct {
	// Same: have is exactly want.
	Same bool
	// Behind and Ahead count the transactions have lacks, or has beyond
	// want (MariaDB; for MySQL, 1 means "some").
	Behind, Ahead uint64
	// Diverged names domains where have holds other transactions than
	// want at the same place (another server wrote them).
	Diverged []string
}

// String says it in a few words.
func (d Diff) String() string {
	if d.Same {
		return "at the same position"
	}
	var parts []string
	if d.Behind > 0 {
		parts = append(parts, transactions(d.Behind)+" behind")
	}
	if d.Ahead > 0 {
		parts = append(parts, transactions(d.Ahead)+" ahead")
	}
	if len(d.Diverged) > 0 {
		parts = append(parts, "diverged in "+strings.Join(d.Diverged, ", "))
	}
	return strings.Join(parts, " and ")
}

// Relative says it followed by the point it is relative to: "5
// transactions ahead of", "2 transactions behind", "diverged in 0 from".
func (d Diff) Relative() string {
	s := d.String()
	switch {
	case d.Same:
		return s + " as"
	case len(d.Diverged) > 0:
		return s + " from"
	case d.Ahead > 0:
		return s + " of"
	}
	return s
}

func transactions(n uint64) string {
	if n == 1 {
		return "1 transaction"
	}
	return fmt.Sprintf("%d transactions", n)
}

// Compare says how position have stands against want, both of flavor.
func Compare(flavor, want, have string) (Diff, error) {
	if flavor == MySQL {
		return compareMySQL(want, have)
	}
	w, err := ParseList(want)
	if err != nil {
		return Diff{}, err
	}
	h, err := ParseList(have)
	if err != nil {
		return Diff{}, err
	}
	var d Diff
	for dom, wg := range w {
		hg, ok := h[dom]
		switch {
		case !ok:
			d.Behind += wg.Seq
		case hg.Seq < wg.Seq:
			d.Behind += wg.Seq - hg.Seq
		case hg.Seq > wg.Seq:
			d.Ahead += hg.Seq - wg.Seq
		case hg.Server != wg.Server:
			d.Diverged = append(d.Diverged, fmt.Sprintf("domain %d (%s, not %s)", dom, hg, wg))
		}
	}
	for dom, hg := range h {
		if _, ok := w[dom]; !ok && hg.Seq > 0 {
			d.Ahead += hg.Seq
		}
	}
	sort.Strings(d.Diverged)
	d.Same = d.Behind == 0 && d.Ahead == 0 && len(d.Diverged) == 0
	return d, nil
}

func compareMySQL(want, have string) (Diff, error) {
	w, err := gmysql.ParseMysqlGTIDSet(want)
	if err != nil {
		return Diff{}, fmt.Errorf("%w: %q: %v", ErrSyntax, want, err)
	}
	h, err := gmysql.ParseMysqlGTIDSet(have)
	if err != nil {
		return Diff{}, fmt.Errorf("%w: %q: %v", ErrSyntax, have, err)
	}
	var d Diff
	switch {
	case w.Equal(h):
		d.Same = true
	case h.Contain(w):
		d.Ahead = 1
	case w.Contain(h):
		d.Behind = 1
	default:
		d.Diverged = []string{fmt.Sprintf("%s is not a subset or superset of %s", have, want)}
	}
	return d, nil
}
