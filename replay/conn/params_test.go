package conn

import (
	"reflect"
	"testing"

	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/store"
)

// wireParams is capture.Params' inverse: a captured execute's values go out as the
// client sent them, types, signedness and NULLs included.
func TestWireParamsInvertsParams(t *testing.T) {
	vs := []store.Value{
		{Type: store.TypeLongLong, Unsigned: true, Int: -1},
		{Type: store.TypeTiny, Int: -5},
		{Type: store.TypeDouble, Float: 2.5},
		{Type: store.TypeDateTime, Bytes: []byte{0xea, 0x07, 11, 30, 12, 0, 1}},
		{Type: store.TypeVarString, Null: true},
		{Type: store.TypeBlob, Bytes: []byte("x")},
	}
	ps := wireParams(nil, vs)
	if len(ps) != len(vs) || !ps[0].Unsigned() || ps[1].Unsigned() || !ps[4].Null {
		t.Fatalf("WireParams = %+v", ps)
	}
	if back := capture.Params(nil, ps); !reflect.DeepEqual(back, vs) {
		t.Fatalf("Params(WireParams(v)) = %+v\nwant %+v", back, vs)
	}
}
