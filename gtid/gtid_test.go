package gtid

import (
	"errors"
	"strings"
	"testing"
)

func TestCompareMariaDB(t *testing.T) {
	for _, c := range []struct {
		want, have string
		same       bool
		behind     uint64
		ahead      uint64
		diverged   int
		text       string
	}{
		{"0-1-42", "0-1-42", true, 0, 0, 0, "at the same position"},
		{"0-1-42", "0-1-36", false, 6, 0, 0, "6 transactions behind"},
		{"0-1-42", "0-1-43", false, 0, 1, 0, "1 transaction ahead"},
		{"0-1-42", "", false, 42, 0, 0, "42 transactions behind"},
		{"", "", true, 0, 0, 0, "at the same position"},
		{"0-1-42,1-2-7", "1-2-7,0-1-42", true, 0, 0, 0, "at the same position"},
		{"0-1-42,1-2-7", "0-1-42", false, 7, 0, 0, "7 transactions behind"},
		{"0-1-42", "0-1-40,1-3-5", false, 2, 5, 0, "2 transactions behind and 5 transactions ahead"},
		{"0-1-42", "0-9-42", false, 0, 0, 1, "diverged in domain 0 (0-9-42, not 0-1-42)"},
	} {
		d, err := Compare(MariaDB, c.want, c.have)
		if err != nil {
			t.Fatalf("%q vs %q: %v", c.want, c.have, err)
		}
		if d.Same != c.same || d.Behind != c.behind || d.Ahead != c.ahead || len(d.Diverged) != c.diverged || d.String() != c.text {
			t.Errorf("Compare(%q, %q) = %+v %q, want same=%v behind=%d ahead=%d diverged=%d %q", c.want, c.have, d, d, c.same, c.behind, c.ahead, c.diverged, c.text)
		}
		if rel := d.Relative(); !strings.HasPrefix(rel, c.text) || (c.ahead > 0 && c.diverged == 0 && !strings.HasSuffix(rel, " ahead of")) {
			t.Errorf("Compare(%q, %q).Relative() = %q, want %q and, when ahead, \" of\"", c.want, c.have, rel, c.text)
		}
	}
}

func TestParseListRefusesWhatIsNoPosition(t *testing.T) {
	for _, s := range []string{"0-1", "a-1-2", "0-1-2,0-1-3", "0-1-2-3", "0-1-x"} {
		if _, err := ParseList(s); !errors.Is(err, ErrSyntax) {
			t.Errorf("ParseList(%q) = %v, want ErrSyntax", s, err)
		}
	}
	l, err := ParseList(" 1-2-7 , 0-1-42 ")
	if err != nil || l.String() != "0-1-42,1-2-7" {
		t.Errorf("ParseList = %v, %v; want 0-1-42,1-2-7", l, err)
	}
	if !l.Includes(GTID{0, 1, 41}) || !l.Includes(GTID{0, 1, 42}) || l.Includes(GTID{0, 1, 43}) || l.Includes(GTID{5, 1, 1}) {
		t.Errorf("Includes is wrong for %s", l)
	}
}

func TestCompareMySQL(t *testing.T) {
	u := "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	for _, c := range []struct {
		want, have, text string
	}{
		{u + ":1-5", u + ":1-5", "at the same position"},
		{u + ":1-5", u + ":1-3", "1 transaction behind"},
		{u + ":1-5", u + ":1-9", "1 transaction ahead"},
	} {
		d, err := Compare(MySQL, c.want, c.have)
		if err != nil || d.String() != c.text {
			t.Errorf("Compare(mysql, %q, %q) = %q, %v; want %q", c.want, c.have, d, err, c.text)
		}
	}
}

func TestFlavorOf(t *testing.T) {
	if FlavorOf("10.11.19-MariaDB-0+deb12u1-log") != MariaDB || FlavorOf("8.0.36") != MySQL {
		t.Error("FlavorOf misreads a version")
	}
}
