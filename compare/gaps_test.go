package compare

import "testing"

// Records lost from the capture are a gap on every table, for every
// session, from the moment they may have been written; no table's reset
// forgets them.
func TestLostRecordsAreAGapOnEveryTable(t *testing.T) {
	g := NewGaps()
	g.Add(0, 100, []string{AnyTable})
	g.Reset(150, []string{"s.t"})
	if _, hit := g.Before(100, []string{"s.t"}); hit {
		t.Error("a statement ending as the lost records begin is after them")
	}
	for _, tables := range [][]string{{"s.t"}, {"s.u", "s.v"}, nil} {
		if gp, hit := g.Before(200, tables); !hit || gp.Table != AnyTable || gp.Session != 0 {
			t.Errorf("%v after lost records: %+v %v", tables, gp, hit)
		}
	}
}
