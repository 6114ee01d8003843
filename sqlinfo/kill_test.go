package sqlinfo

import "testing"

func TestParseKill(t *testing.T) {
	for _, c := range []struct {
		sql     string
		isKill  bool
		id      uint64
		query   bool
		rewrite string // with id 77
	}{
		{"KILL 12", true, 12, false, "KILL 77"},
		{"kill connection 12;", true, 12, false, "kill connection 77;"},
		{"KILL QUERY 12", true, 12, true, "KILL QUERY 77"},
		{"KILL HARD QUERY 12", true, 12, true, "KILL HARD QUERY 77"},
		{"KILL SOFT CONNECTION 4000000000", true, 4000000000, false, "KILL SOFT CONNECTION 77"},
		{"/* app */ KILL 12 /* why */", true, 12, false, "/* app */ KILL 77 /* why */"},
		{"KILL QUERY ID 12", true, 0, false, ""}, // a query id, not a connection's
		{"KILL USER app", true, 0, false, ""},
		{"KILL CONNECTION_ID()", true, 0, false, ""},
		{"KILL 0x1f", true, 0, false, ""},
		{"KILL 12; KILL 13", true, 0, false, ""},
		{"SELECT 1; KILL 12", true, 0, false, ""},
		{"KILL 12 13", true, 0, false, ""},
		{"KILL", true, 0, false, ""},
		{"SELECT 'KILL 12'", false, 0, false, ""},
		{"SELECT kill FROM t", false, 0, false, ""},
		{"UPDATE t SET v = 1", false, 0, false, ""},
	} {
		k, ok := ParseKill(c.sql)
		if ok != c.isKill || k.ID != c.id || k.Query != c.query {
			t.Errorf("%q: %+v %v; want kill %v, id %d, query %v", c.sql, k, ok, c.isKill, c.id, c.query)
			continue
		}
		if c.rewrite != "" {
			if got := k.Rewrite(c.sql, 77); got != c.rewrite {
				t.Errorf("%q rewritten: %q, want %q", c.sql, got, c.rewrite)
			}
		}
	}
}
