package capture

import (
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

// Params appends execute parameters as store values to dst. A parameter
// sent as long data keeps its type and the LongData mark; its value is in
// the session's long-data records.
func Params(dst []store.Value, ps []wire.Param) []store.Value {
	for i := range ps {
		p := &ps[i]
		v := store.Value{Type: p.Type, Unsigned: p.Unsigned(), Null: p.Null, LongData: p.LongData, Int: p.Int, Float: p.Float}
		if !v.Null && !v.LongData {
			v.Bytes = p.Bytes
		}
		dst = append(dst, v)
	}
	return dst
}
