package invariant

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { os.Exit(sandboxtest.Main(m)) }

// Each workload keeps its invariants on a real server under contention
// (eight connections, hot rows, the clients' retries), and its checks
// catch a broken row: the checker can fail.
func TestWorkloadsHoldTheirInvariants(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	for _, tc := range []struct {
		w      Workload
		break_ string
		want   []string
	}{
		{Bank{}, "UPDATE accounts SET balance = balance + 7 WHERE id = 3", []string{
			"accounts: 16 accounts hold 16007 in all, want 16 holding 16000",
			"transfers: account 3 holds ",
		}},
		{Orders{}, "DELETE FROM order_line WHERE d_id = 2 AND o_id = 1 AND number = 1", []string{
			"order 2/1: ",
			"stock: item ",
		}},
	} {
		t.Run(tc.w.Name(), func(t *testing.T) {
			db, dsn := srv.FreshDB(t)
			ctx := context.Background()
			if err := tc.w.Setup(ctx, db, "InnoDB"); err != nil {
				t.Fatal(err)
			}
			if bad, err := tc.w.Check(ctx, db); err != nil || len(bad) != 0 {
				t.Fatalf("the starting rows break %q (%v)", bad, err)
			}
			st, err := Run(ctx, dsn, tc.w, 8, 1500*time.Millisecond, 1)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", st)
			if st.Committed < 100 || st.Failed != 0 {
				t.Errorf("committed %d, failed %d: want 100 or more committed and none given up", st.Committed, st.Failed)
			}
			if bad, err := tc.w.Check(ctx, db); err != nil || len(bad) != 0 {
				t.Fatalf("after the run: %q (%v)", bad, err)
			}
			if _, err := db.Exec(tc.break_); err != nil {
				t.Fatal(err)
			}
			bad, err := tc.w.Check(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			if len(bad) != len(tc.want) {
				t.Fatalf("after %q: %q, want %d violations", tc.break_, bad, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(bad[i], w) {
					t.Errorf("violation %d: %q, want it to start %q", i, bad[i], w)
				}
			}
		})
	}
}
