package sniff

import (
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/store"
)

// An answer of several results that ends with an ERR (BEGIN; INSERT; an
// INSERT that fails) leaves the transaction open: the ERR has no status,
// and the last OK's says where the session stands.
func TestInTransactionReadsPastATrailingError(t *testing.T) {
	in := uint16(mysql.SERVER_STATUS_IN_TRANS | mysql.SERVER_STATUS_AUTOCOMMIT)
	r := &store.Response{Kind: store.RespOK, Status: in | mysql.SERVER_MORE_RESULTS_EXISTS,
		More: []store.Response{{Kind: store.RespOK, Status: in | mysql.SERVER_MORE_RESULTS_EXISTS, AffectedRows: 1}, {Kind: store.RespError, ErrCode: 1062}}}
	if !inTransaction(r) {
		t.Error("BEGIN; INSERT; failed INSERT: not in a transaction")
	}
	r.More[0].Status = mysql.SERVER_STATUS_AUTOCOMMIT | mysql.SERVER_MORE_RESULTS_EXISTS
	if inTransaction(r) {
		t.Error("a transaction that ended before the error: still in one")
	}
}
