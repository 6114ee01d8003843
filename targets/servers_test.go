package targets

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestSharedBeforeAndSameTables(t *testing.T) {
	ts := []Target{{Name: "a", DSN: "u@tcp(h:1)/x"}, {Name: "b", DSN: "u@tcp(h:2)/y"}, {Name: "c", DSN: "u@tcp(h:3)/z"}, {Name: "d", DSN: "u@tcp(h:4)/x"}}
	// a, b and c on one server, d on its own: three databases there,
	// nothing shared with d.
	servers, unknown := []int{0, 0, 0, 3}, make([]error, 4)
	if got := SharedBefore(servers); !slices.Equal(got, []int{0, 1, 2, 0}) {
		t.Errorf("SharedBefore = %v; want [0 1 2 0]", got)
	}
	if err := SameTables(ts, servers, unknown); err != nil {
		t.Errorf("SameTables: %v; want none (one database each)", err)
	}
	// d on a's server, naming a's database: refused.
	servers[3] = 0
	if err := SameTables(ts, servers, unknown); err == nil || !strings.Contains(err.Error(), "targets a and d are the same tables") {
		t.Errorf("SameTables: %v; want a and d refused", err)
	}
	// d's server not known: a number of its own; naming a's database, it
	// is refused with the reason.
	servers[3], unknown[3] = -1, errors.New("target d: GET_LOCK refused")
	if got := SharedBefore(servers); got[3] != 7 {
		t.Errorf("SharedBefore(unknown d) = %v; want 7 for d", got)
	}
	if err := SameTables(ts, servers, unknown); err == nil || !strings.Contains(err.Error(), "targets a and d name one database (\"x\"), and whether they are one server could not be told: target d: GET_LOCK refused") {
		t.Errorf("SameTables: %v", err)
	}
	ts[3].DSN = "u@tcp(h:4)/w"
	if err := SameTables(ts, servers, unknown); err != nil {
		t.Errorf("SameTables with d's own database: %v; want none", err)
	}
}
