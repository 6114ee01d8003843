package replay

import (
	"testing"

	"github.com/tandemdb/tandem/store"
)

// The writes that bypassed the proxy are tried again as a replica tries
// a transaction (slave_transaction_retries, 10), the captured sessions'
// transactions as their clients did (--retries); --retries 0 turns both
// off.
func TestBypassedWritesRetryAsAReplica(t *testing.T) {
	for _, c := range []struct {
		flag            int
		session, bypass int
	}{
		{DefaultRetries, DefaultRetries, 10},
		{20, 20, 20},
		{0, 0, 0},
	} {
		w := &worker{rn: &runner{cfg: &Config{Retries: c.flag}}}
		if got := w.retries(7); got != c.session {
			t.Errorf("--retries %d: a captured session's transaction is tried again %d times, want %d", c.flag, got, c.session)
		}
		if got := w.retries(store.BypassedSessionBase); got != c.bypass {
			t.Errorf("--retries %d: the bypassed writes are tried again %d times, want %d", c.flag, got, c.bypass)
		}
	}
}
