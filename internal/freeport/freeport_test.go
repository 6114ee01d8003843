package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestParseRange(t *testing.T) {
	for _, c := range []struct {
		in     string
		lo, hi int
	}{
		{"32768\t60999\n", 32768, 60999},
		{"1024 65000", 1024, 65000},
		{"", 1, 2},
		{"40000", 1, 2},
		{"x 60999", 1, 2},
		{"60000 50000", 1, 2},
		{"0 100", 1, 2},
		{"1000 70000", 1, 2},
	} {
		if lo, hi := parseRange(c.in, 1, 2); lo != c.lo || hi != c.hi {
			t.Errorf("parseRange(%q) = %d, %d; want %d, %d", c.in, lo, hi, c.lo, c.hi)
		}
	}
}

func TestCandidates(t *testing.T) {
	for _, c := range []struct{ elo, ehi, lo, hi int }{
		{32768, 60999, 10000, 32768}, // Linux's default: below
		{10500, 60999, 61000, 65536}, // too little below: above
		{1024, 65535, 0, 0},          // nothing left: the kernel's choice
		{11000, 64800, 10000, 11000}, // exactly 1,000 below
	} {
		if lo, hi := candidates(c.elo, c.ehi); lo != c.lo || hi != c.hi {
			t.Errorf("candidates(%d, %d) = %d, %d; want %d, %d", c.elo, c.ehi, lo, hi, c.lo, c.hi)
		}
	}
}

// Ports handed out are outside this machine's ephemeral range, free,
// and never the same twice.
func TestPortIsOutsideTheEphemeralRange(t *testing.T) {
	elo, ehi := ephemeralRange()
	seen := map[int]bool{}
	for range 50 {
		p, err := Port()
		if err != nil {
			t.Fatal(err)
		}
		if lo, hi := candidates(elo, ehi); hi > lo && (p < lo || p >= hi) {
			t.Fatalf("port %d outside [%d, %d) (ephemeral range %d-%d)", p, lo, hi, elo, ehi)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		l.Close()
	}
}
