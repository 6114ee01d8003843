package targets

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
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

func TestParseOptionsWithCommas(t *testing.T) {
	got, err := Parse("r=root@tcp(h:1)/db,options=COMMENT='a, b' ROW_FORMAT=DYNAMIC,engine=rocksdb,baseline")
	if err != nil {
		t.Fatal(err)
	}
	if got.Options != "COMMENT='a, b' ROW_FORMAT=DYNAMIC" || got.Engine != "ROCKSDB" || !got.Baseline {
		t.Fatalf("Parse = %+v", got)
	}
	if _, err := Parse("r=root@tcp(h:1)/db,options=ROW_FORMAT"); !errors.Is(err, ErrBadSpec) {
		t.Errorf("an option without a value: %v", err)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := dir + "/t.yaml"
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ts, err := Load(write(`targets:
  - name: innodb
    dsn: root@tcp(127.0.0.1:3306)/sbtest
    baseline: true
  - name: rocks
    dsn: root@tcp(127.0.0.1:3307)/sbtest
    engine: myrocks
    options: "COMMENT='trial, week 2' ROW_FORMAT=DYNAMIC"
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Target{{Name: "innodb", DSN: "root@tcp(127.0.0.1:3306)/sbtest", Engine: "InnoDB", Baseline: true},
		{Name: "rocks", DSN: "root@tcp(127.0.0.1:3307)/sbtest", Engine: "ROCKSDB", Options: "COMMENT='trial, week 2' ROW_FORMAT=DYNAMIC"}}
	if !reflect.DeepEqual(ts, want) {
		t.Fatalf("Load = %+v", ts)
	}
	for _, bad := range []string{"targets:\n  - name: x\n    dsn: root@tcp(h:1)/d\n    colour: blue\n", "targets:\n  - name: x\n", "", "targets: []\n"} {
		if _, err := Load(write(bad)); !errors.Is(err, ErrBadSpec) {
			t.Errorf("Load(%q): %v, want ErrBadSpec", bad, err)
		}
	}
}

// A targets file names credentials from the environment (a Kubernetes
// Secret), never holding them; an unset one is an error naming it.
func TestLoadExpandsCredentials(t *testing.T) {
	p := filepath.Join(t.TempDir(), "targets.yaml")
	os.WriteFile(p, []byte("targets:\n  - name: a\n    dsn: 'app:${TANDEM_TEST_PW}@tcp(127.0.0.1:3306)/x'\n"), 0o644)
	t.Setenv("TANDEM_TEST_PW", "s3cr$t")
	ts, err := Load(p)
	if err != nil || len(ts) != 1 || ts[0].DSN != "app:s3cr$t@tcp(127.0.0.1:3306)/x" {
		t.Fatalf("%+v, %v", ts, err)
	}
	os.Unsetenv("TANDEM_TEST_PW")
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "${TANDEM_TEST_PW}, which is not set") {
		t.Fatalf("unset: %v", err)
	}
}
