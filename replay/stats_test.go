package replay

import (
	"fmt"
	"testing"

	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// Text statements with literals get an Info per text from the analyzer
// (its own caches are bounded); a worker's cache of digest numbers must
// not keep them all: 20,000 texts of one digest leave at most
// maxDigestOf entries, and every statement is still counted under its
// digest.
func TestWorkerDigestCacheIsBounded(t *testing.T) {
	an, reg, ws := sqlinfo.NewAnalyzer(), newDigestRegistry(), newWStats()
	for i := range 20000 {
		info := an.Info(fmt.Sprintf("UPDATE t SET k = k + 1 WHERE id = %d", i))
		ws.statement(reg, info, &store.Outcome{Service: 1000}, false, false)
	}
	if n := len(ws.digestOf); n > maxDigestOf {
		t.Errorf("the cache holds %d Infos, want at most %d", n, maxDigestOf)
	}
	if len(reg.list) != 2 || ws.digests[1] == nil || ws.digests[1].Count() != 20000 {
		t.Errorf("digests %v; the statement's histogram %v, want 20000 under one digest", reg.list, ws.digests)
	}
}
