package store

import (
	"fmt"
	"strings"
)

// SeqGaps finds the sequence numbers a capture lacks. A capture numbers its
// records 1, 2, 3 … as they are appended: a number missing between two
// that are there is a record lost — a crash that emptied or cut a WAL in
// the middle, or a damaged file — and so is one missing before the first.
// (Records lost after the last one are seen only against a clean close's
// summary, which Reader.Records checks.) Feed it every record's Seq in
// order.
type SeqGaps struct {
	next uint64
	// Missing counts the lost records; Ranges lists the first maxGaps
	// runs of them, and More how many runs were left off.
	Missing uint64
	Ranges  []SeqRange
	More    int
}

// SeqRange is a run of missing sequence numbers, From to To inclusive.
type SeqRange struct{ From, To uint64 }

const maxGaps = 20

// Note takes the next record's sequence number.
func (g *SeqGaps) Note(seq uint64) {
	if g.next == 0 {
		g.next = 1
	}
	if seq > g.next {
		g.Missing += seq - g.next
		if len(g.Ranges) < maxGaps {
			g.Ranges = append(g.Ranges, SeqRange{g.next, seq - 1})
		} else {
			g.More++
		}
	}
	g.next = max(g.next, seq+1)
}

// String says what is missing, e.g. "3,912 records lost, in 1 run (seq
// 7,732 to 11,643)"; "" when nothing is.
func (g *SeqGaps) String() string {
	if g == nil || g.Missing == 0 {
		return ""
	}
	var rs []string
	for _, r := range g.Ranges {
		if r.From == r.To {
			rs = append(rs, fmt.Sprint(r.From))
		} else {
			rs = append(rs, fmt.Sprintf("%d to %d", r.From, r.To))
		}
	}
	if g.More > 0 {
		rs = append(rs, fmt.Sprintf("and %d more runs", g.More))
	}
	runs := len(g.Ranges) + g.More
	s := "runs"
	if runs == 1 {
		s = "run"
	}
	return fmt.Sprintf("%d records lost, in %d %s (seq %s)", g.Missing, runs, s, strings.Join(rs, ", "))
}
