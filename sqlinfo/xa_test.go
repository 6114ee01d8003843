package sqlinfo

import (
	"strings"
	"testing"
)

func TestMoveXid(t *testing.T) {
	long := strings.Repeat("q", 58)
	for _, c := range []struct{ sql, want string }{
		{"XA START 'pay-7', 'b1'", "XA START 'pay-7', 'b1~tandem1'"},
		{"xa begin 'pay-7'", "xa begin 'pay-7', '~tandem1'"},
		{"XA START 'pay-7' JOIN", "XA START 'pay-7', '~tandem1' JOIN"},
		{"XA END 'g', 'b', 7 SUSPEND FOR MIGRATE", "XA END 'g', 'b~tandem1', 7 SUSPEND FOR MIGRATE"},
		{"XA PREPARE 'g',''", "XA PREPARE 'g','~tandem1'"},
		{"XA COMMIT 'g' ONE PHASE;", "XA COMMIT 'g', '~tandem1' ONE PHASE;"},
		{"XA ROLLBACK \"g\", \"b\"", "XA ROLLBACK \"g\", \"b~tandem1\""},
		// Escapes before the closing quote stay whole.
		{`XA START 'g', 'it''s\\'`, `XA START 'g', 'it''s\\~tandem1'`},
		// Hexadecimal and binary keep their notation.
		{"XA START X'67', X'62'", "XA START X'67', X'627e74616e64656d31'"},
		{"XA START 0x67, 0x62, 3", "XA START 0x67, 0x627e74616e64656d31, 3"},
		{"XA START 'g', b'01100010'", "XA START 'g', b'011000100111111001110100011000010110111001100100011001010110110100110001'"},
		{"XA START 'g', 0b1", "XA START 'g', 0b10111111001110100011000010110111001100100011001010110110100110001"},
		{"/* tm */ XA START 'g' /* end */", "/* tm */ XA START 'g', '~tandem1' /* end */"},
		// A qualifier that would pass 64 bytes, and what names no xid,
		// stay as they are.
		{"XA START 'g', '" + long + "'", ""},
		{"XA RECOVER", ""},
		{"XA RECOVER FORMAT='SQL'", ""},
		{"XA START @x", ""},
		{"XA START 'g'; XA END 'g'", ""},
		{"/*!XA START 'g' */", ""},
		{"SELECT 'XA START'", ""},
		{"XA START 'unterminated", ""},
	} {
		got, ok := MoveXid(c.sql, "~tandem1")
		want := c.want
		if want == "" {
			want = c.sql
		}
		if got != want || ok != (c.want != "") {
			t.Errorf("MoveXid(%q) = %q, %v; want %q, %v", c.sql, got, ok, want, c.want != "")
		}
	}
}

func TestXidText(t *testing.T) {
	for _, c := range []struct{ sql, want string }{
		{"XA START 'pay-7', 'b1'", "'pay-7','b1'"},
		{"/* tm */ xa commit 'pay-7' , 'b1' ONE PHASE", "'pay-7','b1'"},
		{"XA END X'67', 0x62, 3 SUSPEND", "X'67',0x62,3"},
		{"XA PREPARE 'g'", "'g'"},
		{"XA ROLLBACK 'g';", "'g'"},
		{"XA RECOVER", ""},
		{"XA START @x", ""},
		{"COMMIT", ""},
	} {
		got, ok := XidText(c.sql)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("XidText(%q) = %q, %v; want %q", c.sql, got, ok, c.want)
		}
	}
	a := NewAnalyzer()
	for sql, want := range map[string][2]bool{"XA PREPARE 'g'": {true, false}, "/* x */ XA RECOVER": {false, true}, "XA END 'g'": {false, false}} {
		if i := a.Info(sql); i.XAPrepare != want[0] || i.XARecover != want[1] {
			t.Errorf("%q: XAPrepare %v, XARecover %v; want %v", sql, i.XAPrepare, i.XARecover, want)
		}
	}
}

func TestXidKey(t *testing.T) {
	one := []string{"XA START 'g'", "XA COMMIT 'g','',1", "XA END \"g\", ''", "XA PREPARE X'67'", "XA ROLLBACK 0x67, '', 001", "XA COMMIT b'01100111'", "XA COMMIT 0b1100111"}
	want, _ := XidKey(one[0])
	if want != "67,,1" {
		t.Fatalf("XidKey(%q) = %q; want 67,,1", one[0], want)
	}
	for _, sql := range one[1:] {
		if got, ok := XidKey(sql); !ok || got != want {
			t.Errorf("XidKey(%q) = %q, %v; want %q", sql, got, ok, want)
		}
	}
	for sql, want := range map[string]string{
		"XA START 'pay-7', 'b1'":  "7061792d37,6231,1",
		`XA START 'it''s\\', 'b'`: "697427735c,62,1",
		"XA START 'g', 'b', 7":    "67,62,7",
		`XA START 'a\%'`:          "615c25,,1",
	} {
		if got, ok := XidKey(sql); !ok || got != want {
			t.Errorf("XidKey(%q) = %q, %v; want %q", sql, got, ok, want)
		}
	}
	for _, sql := range []string{"XA START 'g', 'b', 1", "XA START 'g', 'b'"} {
		if a, _ := XidKey(sql); a != "67,62,1" {
			t.Errorf("XidKey(%q) = %q; want 67,62,1", sql, a)
		}
	}
	if _, ok := XidKey("XA RECOVER"); ok {
		t.Error("XidKey(XA RECOVER) ok; want false")
	}
}
