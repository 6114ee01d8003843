package report

import (
	"reflect"
	"testing"
)

// Every counter of a target's result is summed when shards merge, every
// count map added, every list joined: a counter added to
// store.TargetResult and forgotten in mergeTarget fails here.
func TestMergeAddsEveryCounter(t *testing.T) {
	fill := func() *Target {
		var x Target
		v := reflect.ValueOf(&x.TargetResult).Elem()
		for i := range v.NumField() {
			f := v.Field(i)
			switch f.Kind() {
			case reflect.Int64:
				f.SetInt(1)
			case reflect.Map:
				if f.Type() == reflect.TypeOf(map[string]int64{}) {
					f.Set(reflect.ValueOf(map[string]int64{"k": 1}))
				}
			case reflect.Slice:
				f.Set(reflect.MakeSlice(f.Type(), 1, 1))
			}
		}
		return &x
	}
	o := fill()
	mergeTarget(o, fill(), map[string]float64{})
	v := reflect.ValueOf(o.TargetResult)
	ty := v.Type()
	for i := range v.NumField() {
		f, name := v.Field(i), ty.Field(i).Name
		switch f.Kind() {
		case reflect.Int64:
			if f.Int() != 2 {
				t.Errorf("%s: %d after merging two shards of 1 each, want 2", name, f.Int())
			}
		case reflect.Map:
			if m, ok := f.Interface().(map[string]int64); ok && m["k"] != 2 {
				t.Errorf("%s: %v after merging, want k: 2", name, m)
			}
		case reflect.Slice:
			// Created and the footprints are the last shard's end state,
			// not sums.
			if want := map[string]int{"Created": 1, "Footprint": 1, "FootprintBefore": 1}[name]; want > 0 {
				if f.Len() != want {
					t.Errorf("%s: %d entries, want the last shard's %d", name, f.Len(), want)
				}
			} else if f.Len() != 2 {
				t.Errorf("%s: %d entries after merging two of 1, want 2", name, f.Len())
			}
		}
	}
}
