package sqlinfo

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Which rows a statement names, as keys on a primary key, with an
// execute's parameters resolved; nil when the rows are not all named.
func TestPointKeys(t *testing.T) {
	params := []string{"5", "7", "9"}
	resolve := func(i int) (string, bool) {
		if i < len(params) {
			return params[i], true
		}
		return "", false
	}
	for _, c := range []struct {
		sql  string
		pk   []string
		want []string // "" joins: table|v|v
	}{
		{"UPDATE sbtest1 SET k = k + 1 WHERE id = ?", []string{"id"}, []string{"sbtest1|5"}},
		{"UPDATE sbtest1 SET c = ? WHERE id = ?", []string{"id"}, []string{"sbtest1|7"}},
		{"DELETE FROM sbtest1 WHERE id = 42", []string{"id"}, []string{"sbtest1|42"}},
		{"SELECT id, balance FROM accounts WHERE id IN (?, ?) ORDER BY id FOR UPDATE", []string{"id"}, []string{"accounts|5", "accounts|7"}},
		{"SELECT qty FROM stock WHERE item = ? FOR UPDATE", []string{"item"}, []string{"stock|5"}},
		{"UPDATE orders SET carrier = ? WHERE d_id = ? AND o_id = ?", []string{"d_id", "o_id"}, []string{"orders|7|9"}},
		{"UPDATE orders SET carrier = 1 WHERE (o_id = ? AND d_id = 3) AND carrier IS NULL", []string{"d_id", "o_id"}, []string{"orders|3|5"}},
		{"DELETE FROM new_order WHERE d_id IN (1, 2) AND o_id = ?", []string{"d_id", "o_id"}, []string{"new_order|1|5", "new_order|2|5"}},
		{"UPDATE warehouse SET ytd = ytd + ? WHERE id = 1", []string{"id"}, []string{"warehouse|1"}},
		{"UPDATE t SET v = 1 WHERE -3 = id", []string{"id"}, []string{"t|-3"}},
		{"INSERT INTO sbtest1 (id, k, c, pad) VALUES (?, ?, ?, ?)", []string{"id"}, []string{"sbtest1|5"}},
		{"INSERT INTO t (a, id) VALUES (1, 10), (2, 11)", []string{"id"}, []string{"t|10", "t|11"}},
		{"REPLACE INTO t (id, v) VALUES (?, ?)", []string{"id"}, []string{"t|5"}},
		// A write that bypassed the proxy, rebuilt from its row images.
		{"INSERT INTO `s`.`sbtest2` (`id`, `k`, `c`) VALUES (5, 3, CAST(X'41' AS BINARY))", []string{"id"}, []string{"sbtest2|5"}},
		{"UPDATE `s`.`sbtest2` SET `id` = 5, `c` = CAST(X'41' AS BINARY) WHERE `id` = 5", []string{"id"}, []string{"sbtest2|5"}},
		// Not all named: nil.
		{"INSERT INTO transfers (from_id, to_id, amount) VALUES (?, ?, ?)", []string{"id"}, nil}, // AUTO_INCREMENT key
		{"INSERT INTO t VALUES (1, 2)", []string{"id"}, nil},                                     // no column list
		{"UPDATE sbtest1 SET k = k + 1 WHERE id BETWEEN ? AND ?", []string{"id"}, nil},
		{"UPDATE t SET v = 1 WHERE id = 1 OR id = 2", []string{"id"}, nil},
		{"UPDATE orders SET carrier = ? WHERE o_id = ?", []string{"d_id", "o_id"}, nil},
		{"UPDATE t SET v = 1", []string{"id"}, nil},
		{"UPDATE t JOIN u ON t.id = u.id SET t.v = 1 WHERE t.id = 1", []string{"id"}, nil},
		{"SELECT v FROM t WHERE id = (SELECT 1)", []string{"id"}, nil},
		{"UPDATE t SET v = 1 WHERE id = ?", nil, nil}, // no known key
		{"INSERT INTO t (id) SELECT id FROM u", []string{"id"}, nil},
		{"UPDATE t SET v = 1 WHERE id = ? + 1", []string{"id"}, nil},
		{"INSERT INTO t (id, v) VALUES (CAST(X'31' AS BINARY), 1)", []string{"id"}, nil}, // a key the text does not give
	} {
		info := Analyze(c.sql)
		table := ""
		if info.Point != nil {
			table = info.Point.Table.Name
		}
		got := info.Point.Keys(table, c.pk, resolve)
		var want []string
		for _, w := range c.want {
			parts := strings.SplitN(w, "|", 2)
			want = append(want, parts[0]+"\x00"+strings.ReplaceAll(parts[1], "|", "\x01"))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s (pk %v): keys %q, want %q", c.sql, c.pk, got, want)
		}
	}
}

// The analyzer's digest cache does not hand one text's literal values to
// another text of its digest: each gets its own row keys and its own
// autocommit value (it gave "SET autocommit=1" the 0 of the "=0" seen
// first, and every "… WHERE id = N" the key of the first N). Texts without
// literal facts still share one Info.
func TestAnalyzerKeepsEachTextsLiterals(t *testing.T) {
	a := NewAnalyzer()
	for _, c := range []struct {
		sql        string
		autocommit byte
		key        string
	}{
		{"SET autocommit=0", '0', ""},
		{"SET autocommit=1", '1', ""},
		{"SET autocommit = 0", '0', ""},
		{"UPDATE t SET v = 1 WHERE id = 5", 0, "t\x005"},
		{"UPDATE t SET v = 1 WHERE id = 7", 0, "t\x007"},
		{"INSERT INTO t (id, v) VALUES (9, CAST(X'41' AS BINARY))", 0, "t\x009"},
		{"INSERT INTO t (id, v) VALUES (10, CAST(X'42' AS BINARY))", 0, "t\x0010"},
		{"UPDATE t SET v = 1 WHERE id = 5", 0, "t\x005"}, // seen before: its own again
	} {
		info := a.Info(c.sql)
		if info.SetAutocommit != c.autocommit {
			t.Errorf("%s: autocommit %q, want %q", c.sql, info.SetAutocommit, c.autocommit)
		}
		var key string
		if ks := info.Point.Keys("t", []string{"id"}, func(int) (string, bool) { return "", false }); len(ks) == 1 {
			key = ks[0]
		}
		if key != c.key {
			t.Errorf("%s: row key %q, want %q", c.sql, key, c.key)
		}
	}
	p1, p2 := a.Info("UPDATE t SET v = ? WHERE id = ?"), a.Info("UPDATE t  SET v = ? WHERE id = ?")
	if p1 != p2 {
		t.Error("two texts of one digest without literal facts got an Info each; want the cached one")
	}
}

// What a statement's rows may leave unnamed: the columns it assigns (an
// assignment to a key column moves the row) and a subquery (it reads rows
// the keys do not name). Replay's order gate lets a statement pass
// another only by keys it can trust.
func TestPointSetAndSubquery(t *testing.T) {
	for _, c := range []struct {
		sql      string
		set      []string
		subquery bool
	}{
		{"UPDATE t SET v = 1, W = v + 1 WHERE id = 5", []string{"v", "w"}, false},
		{"UPDATE t SET id = id + 1 WHERE id = 5", []string{"id"}, false},
		{"INSERT INTO t (id, v) VALUES (1, 2) ON DUPLICATE KEY UPDATE v = v + 1", []string{"v"}, false},
		{"INSERT INTO t (id, v) VALUES (1, 2)", nil, false},
		{"SELECT c FROM t WHERE id = 5", nil, false},
		{"SELECT c FROM t WHERE id = 5 AND k > (SELECT AVG(k) FROM t)", nil, true},
		{"UPDATE t SET v = (SELECT MAX(v) FROM t AS u) WHERE id = 5", []string{"v"}, true},
		{"DELETE FROM t WHERE id = 5 AND EXISTS (SELECT 1 FROM u WHERE u.id = 5)", nil, true},
	} {
		p := Analyze(c.sql).Point
		if p == nil {
			t.Errorf("%s: no point", c.sql)
			continue
		}
		if !slices.Equal(p.Set, c.set) || p.Subquery != c.subquery {
			t.Errorf("%s: set %q, subquery %v; want %q, %v", c.sql, p.Set, p.Subquery, c.set, c.subquery)
		}
	}
}

// An IN list gives each value once, in the order the text gives them,
// however long it is (past 16 values addAll finds them by a map): 2,000
// values of 700 distinct ids, with an equality on the same column before
// it, and a short list with a repeat, as before.
func TestPointInListValuesOnce(t *testing.T) {
	var ids []string
	var want []PointValue
	seen := map[string]bool{"3": true}
	want = append(want, PointValue{Param: -1, Lit: "3"})
	for i := range 2000 {
		id := strconv.Itoa(i * 7919 % 700)
		ids = append(ids, id)
		if !seen[id] {
			seen[id] = true
			want = append(want, PointValue{Param: -1, Lit: id})
		}
	}
	info := Analyze("UPDATE t SET v = 1 WHERE id = 3 AND id IN (" + strings.Join(ids, ", ") + ")")
	if info.Point == nil {
		t.Fatal("no point")
	}
	if got := info.Point.Where["id"]; !slices.Equal(got, want) {
		t.Fatalf("%d values, want the %d distinct ones in order (first %v, want %v)", len(got), len(want), got[:min(5, len(got))], want[:5])
	}
	info = Analyze("SELECT v FROM t WHERE id IN (?, 4, ?, 4)")
	if got, want := info.Point.Where["id"], []PointValue{{Param: 0}, {Param: -1, Lit: "4"}, {Param: 1}}; !slices.Equal(got, want) {
		t.Fatalf("short list: %v, want %v", got, want)
	}
}
