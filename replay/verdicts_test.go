package replay

import (
	"testing"
	"time"

	"github.com/tandemdb/tandem/store"
)

// A record noted again (its transaction retried or run again) is counted
// once, under its last outcome, whether that was compared or unanswered:
// an unanswered run after a compared one was counted in both (compared
// and unanswered adding up to more than the records), and a compared run
// after an unanswered one left it unanswered too.
func TestVerdictsCountARecordOnce(t *testing.T) {
	f := NewFeed()
	rec := &store.Record{Seq: 5, Session: 1, Kind: store.KindQuery, SQL: "SELECT 1", Start: time.Unix(1, 0),
		Resp: store.Response{Kind: store.RespResultSet, Rows: 1}}
	f.Index(rec)
	v := NewVerdicts(f)
	answered := &store.Outcome{Seq: 5, Session: 1, Rows: 1}
	unanswered := &store.Outcome{Seq: 5, Session: 1, Flags: store.OutcomeError | store.OutcomeClientError}
	for i, c := range []struct {
		o                     *store.Outcome
		compared, unavailable int64
	}{
		{answered, 1, 0},
		{unanswered, 0, 1},
		{answered, 1, 0},
		{unanswered, 0, 1},
		{unanswered, 0, 1},
	} {
		v.Note(Done{Rec: rec, SQL: rec.SQL, Outcome: c.o})
		if got := v.Counts(); got.Compared != c.compared || got.Unavailable != c.unavailable {
			t.Errorf("after note %d: compared %d, unanswered %d; want %d and %d", i+1, got.Compared, got.Unavailable, c.compared, c.unavailable)
		}
	}
}
