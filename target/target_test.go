package target

import (
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	got, err := Parse("comp=root@tcp(127.0.0.1:3306)/sbtest,engine=innodb,options=ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8,baseline")
	if err != nil {
		t.Fatal(err)
	}
	want := Target{Name: "comp", DSN: "root@tcp(127.0.0.1:3306)/sbtest", Engine: "InnoDB", Options: "ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8", Baseline: true}
	if got != want || got.Database() != "sbtest" || got.Addr() != "127.0.0.1:3306" {
		t.Fatalf("Parse = %+v", got)
	}
	if r, _ := Parse("r=root@tcp(h:1)/db,engine=MyRocks"); r.Engine != "ROCKSDB" {
		t.Errorf("myrocks → %q", r.Engine)
	}
	if r, _ := Parse("t=root@tcp(h:1)/db,engine=tokudb"); r.Engine != "TokuDB" {
		t.Errorf("tokudb → %q", r.Engine)
	}
	for _, bad := range []string{"", "noequals", "=dsn", "x=root@tcp(h:1)/db,colour=blue", "x=not a dsn(("} {
		if _, err := Parse(bad); !errors.Is(err, ErrBadSpec) {
			t.Errorf("Parse(%q): err = %v, want ErrBadSpec", bad, err)
		}
	}
}
