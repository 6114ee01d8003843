package charset

import "testing"

func TestToUTF8(t *testing.T) {
	for _, c := range []struct {
		set, in, want string
	}{
		{"koi8r", "\xd4\xc1\xc2\xcc\xc9\xc3\xc1", "таблица"},
		{"KOI8R", "sbtest.\xd4\xc1\xc2", "sbtest.таб"},
		{"'koi8r' COLLATE koi8r_bin", "\xd4", "т"},
		{"cp1251", "\xf2\xe0\xe1", "таб"},
		{"latin1", "caf\xe9", "café"},
		{"latin1", "\x80", "€"}, // MariaDB's latin1 is Windows-1252
		{"sjis", "\x83\x65\x81\x5b\x83\x75\x83\x8b", "テーブル"},
		{"utf8mb4", "таблица", "таблица"},
		{"utf8", "caf\xe9", "caf\xe9"}, // UTF-8 sets convert nothing
		{"koi8r", "plain ascii", "plain ascii"},
	} {
		s, ok := Named(c.set)
		if !ok {
			t.Errorf("%q: not known", c.set)
			continue
		}
		if got := s.ToUTF8(c.in); got != c.want {
			t.Errorf("%s: %q -> %q, want %q", c.set, c.in, got, c.want)
		}
	}
	if _, ok := Named("utf32"); ok {
		t.Error("utf32 is known")
	}
	if s, ok := OfCollation(7); !ok || s.Name() != "koi8r" {
		t.Errorf("collation 7: %v %v", s.Name(), ok)
	}
	if s, ok := OfCollation(45); !ok || s.Name() != "utf8mb4" {
		t.Errorf("collation 45: %v %v", s.Name(), ok)
	}
	if _, ok := OfCollation(250); ok { // no collation has that id
		t.Error("collation 250 is known")
	}
}

// A session's set follows the handshake, SET NAMES / CHARACTER SET /
// character_set_client, and COM_RESET_CONNECTION.
func TestSessionFollowsTheClientsSet(t *testing.T) {
	var s Session
	steps := []struct {
		do   func()
		want string
	}{
		{func() {}, "utf8mb4"},
		{func() { s.Connect(7) }, "koi8r"},
		{func() { s.Statement("SELECT 'names'") }, "koi8r"},
		{func() { s.Statement("SET NAMES utf8mb4") }, "utf8mb4"},
		{func() { s.Statement("set character set cp1251") }, "cp1251"},
		{func() { s.Statement("SET @@session.character_set_client = latin1") }, "latin1"},
		{func() { s.Statement("SET NAMES 'utf32'") }, "utf8mb4"}, // unknown: UTF-8
		{func() { s.Reset() }, "koi8r"},
		{func() { s.Connect(0) }, "koi8r"}, // no collation captured: unchanged
		{func() { s.Connect(8) }, "latin1"},
	}
	for i, st := range steps {
		st.do()
		if got := s.Name(); got != st.want {
			t.Errorf("step %d: %s, want %s", i, got, st.want)
		}
	}
}
