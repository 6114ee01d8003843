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

// WireParams appends store values as execute parameters to dst: the
// inverse of Params, for sending a captured execute again.
func WireParams(dst []wire.Param, vs []store.Value) []wire.Param {
	for i := range vs {
		v := &vs[i]
		p := wire.Param{ParamType: wire.ParamType{Type: v.Type}, Null: v.Null, LongData: v.LongData, Int: v.Int, Float: v.Float, Bytes: v.Bytes}
		if v.Unsigned {
			p.Flag = 0x80
		}
		dst = append(dst, p)
	}
	return dst
}
