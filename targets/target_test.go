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

// tandem proxy's --config has a shadows: list of the same entries; a
// shadow cannot be a baseline, and a file without the list is an error.
func TestLoadShadows(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "s.yaml")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ts, err := LoadShadows(write("shadows:\n  - name: rocks\n    dsn: root@tcp(127.0.0.1:3307)/shop\n    engine: myrocks\n  - name: zipped\n    dsn: root@tcp(127.0.0.1:3308)/shop\n    options: ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8\n"))
	want := []Target{{Name: "rocks", DSN: "root@tcp(127.0.0.1:3307)/shop", Engine: "ROCKSDB"},
		{Name: "zipped", DSN: "root@tcp(127.0.0.1:3308)/shop", Engine: "InnoDB", Options: "ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8"}}
	if err != nil || !reflect.DeepEqual(ts, want) {
		t.Fatalf("LoadShadows = %+v, %v", ts, err)
	}
	for bad, msg := range map[string]string{
		"targets:\n  - name: x\n    dsn: root@tcp(h:1)/d\n":                     "has no shadows: list; see 'tandem proxy --help'",
		"shadows:\n  - name: x\n    dsn: root@tcp(h:1)/d\n    baseline: true\n": "shadow x: a shadow cannot be the baseline (the primary is)",
		"shadows:\n  - name: x\n":                                               "shadow 1 needs a name and a dsn",
	} {
		if _, err := LoadShadows(write(bad)); !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), msg) {
			t.Errorf("LoadShadows(%q): %v, want ErrBadSpec …%s", bad, err, msg)
		}
	}
	// A replay's file with a shadows: list only has no targets.
	if _, err := Load(write("shadows:\n  - name: x\n    dsn: root@tcp(h:1)/d\n")); err == nil || !strings.Contains(err.Error(), "has no targets: list") {
		t.Errorf("Load of a shadows file: %v", err)
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

// A target that cannot be used is quoted back in its error, without its
// password: a DSN that does not parse, a tls= the driver does not know, a
// key Parse does not know, a spec without a name, and a targets file's
// DSN whose password came from the environment.
func TestBadTargetErrorsHideThePassword(t *testing.T) {
	const pw = "Pw_Secret_1"
	for _, spec := range []string{
		"a=app:" + pw + "@tcp(127.0.0.1:3306/sbtest",            // no closing parenthesis
		"a=app:" + pw + "@tcp(127.0.0.1:3306)/sbtest?tls=bogus", // unknown TLS config
		"a=app:" + pw + "@tcp(127.0.0.1:3306)/sbtest,bogus=1",   // unknown key
		"a=app:" + pw + "@tcp(127.0.0.1:3306)/sbtest,engine=",   // no engine
		"app:" + pw + "@tcp(127.0.0.1:3306)/sbtest",             // no name
		"app:" + pw + "@tcp(127.0.0.1:3306)/sbtest?timeout=1s",  // no name, an "=" in the DSN
	} {
		_, err := Parse(spec)
		if !errors.Is(err, ErrBadSpec) {
			t.Fatalf("Parse(%q): err = %v, want ErrBadSpec", spec, err)
		}
		if strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), "app:***@") {
			t.Errorf("Parse(%q): %v", spec, err)
		}
	}
	// A password holding a comma, which --target splits at: the rest of
	// it is no key, and is not quoted.
	for _, spec := range []string{"a=app:Pw,Secret_1@tcp(127.0.0.1:3306)/sbtest", "a=app:Pw_Secret_1,engine=x@tcp(127.0.0.1:3306)/sbtest"} {
		_, err := Parse(spec)
		if !errors.Is(err, ErrBadSpec) || strings.Contains(err.Error(), "Secret_1") {
			t.Errorf("Parse(%q): %v", spec, err)
		}
	}
	p := filepath.Join(t.TempDir(), "targets.yaml")
	os.WriteFile(p, []byte("targets:\n  - name: a\n    dsn: 'app:${TANDEM_TEST_PW}@tcp(127.0.0.1:3306/x'\n"), 0o644)
	t.Setenv("TANDEM_TEST_PW", pw)
	if _, err := Load(p); err == nil || strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), `DSN "app:***@tcp(127.0.0.1:3306/x": invalid DSN`) {
		t.Fatalf("Load: %v", err)
	}
}

func TestRedactDSN(t *testing.T) {
	for in, want := range map[string]string{
		"root@tcp(127.0.0.1:3306)/db":             "root@tcp(127.0.0.1:3306)/db",
		"root:pw@tcp(127.0.0.1:3306)/db":          "root:***@tcp(127.0.0.1:3306)/db",
		"root:p@ss:w@rd@tcp(127.0.0.1:3306)/db":   "root:***@tcp(127.0.0.1:3306)/db",
		"root:@tcp(127.0.0.1:3306)/db":            "root:***@tcp(127.0.0.1:3306)/db",
		"app:pw@unix(/run/mysqld/mysqld.sock)/db": "app:***@unix(/run/mysqld/mysqld.sock)/db",
		// An "@" in the parameters is not the user's; text cut at a comma.
		"root@tcp(127.0.0.1:3306)/db?tls=bogus&x=a@b": "root@tcp(127.0.0.1:3306)/db?tls=bogus&x=a@b",
		"app:Pw":                 "app:***",
		"tcp(127.0.0.1:3306)/db": "tcp(127.0.0.1:3306)/db",
		"/db":                    "/db",
		"":                       "",
	} {
		if got := RedactDSN(in); got != want {
			t.Errorf("RedactDSN(%q) = %q, want %q", in, got, want)
		}
	}
}

// One chooser of the baseline for every command: the one marked, else the
// first; two marked or two with one name are refused, naming them.
func TestBaseline(t *testing.T) {
	ts := []Target{{Name: "a"}, {Name: "b", Baseline: true}, {Name: "c"}}
	if i, err := Baseline(ts); i != 1 || err != nil {
		t.Errorf("marked b: %d, %v; want 1", i, err)
	}
	if i, err := Baseline(ts[2:]); i != 0 || err != nil {
		t.Errorf("none marked: %d, %v; want 0", i, err)
	}
	ts[2].Baseline = true
	if _, err := Baseline(ts); err == nil || err.Error() != "targets b and c are both marked baseline; mark one" {
		t.Errorf("two marked: %v", err)
	}
	ts[2] = Target{Name: "a"}
	if _, err := Baseline(ts); err == nil || err.Error() != `two targets are named "a"; give each its own name (name=DSN)` {
		t.Errorf("two named a: %v", err)
	}
}
