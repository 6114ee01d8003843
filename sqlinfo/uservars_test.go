package sqlinfo

import (
	"fmt"
	"testing"
)

func TestUserVarFlow(t *testing.T) {
	for _, c := range []struct {
		sql           string
		assigns, read string
	}{
		{"SELECT c FROM t WHERE id = 1", "[]", "[]"},
		{"SET @u = UUID()", "[{u [] true false}]", "[]"},
		{"SET @Old_Mode = @@SQL_MODE, sql_mode = 'ANSI'", "[{old_mode [] false false}]", "[]"},
		{"SET @a = 1, @`B c` = @a + @x", "[{a [] false false} {b c [a x] false false}]", "[]"},
		{"SET @t = NOW(6), @r = RAND(7), @s = RAND()", "[{t [] false false} {r [] false false} {s [] true false}]", "[]"},
		{"SET @id = LAST_INSERT_ID(), @n = (SELECT MAX(id) FROM t), @k = 2 * 3", "[{id [] false false} {n [] false false} {k [] false false}]", "[]"},
		{"SET @i = @@session.identity, @c = CURRENT_TIMESTAMP, @who = CURRENT_USER", "[{i [] false false} {c [] false false} {who [] true false}]", "[]"},
		{"SET @q = NEXT VALUE FOR s, @p = NEXTVAL(s)", "[{q [] false false} {p [] false false}]", "[]"},
		{"INSERT INTO t VALUES (1, @u, @V)", "[]", "[u v]"},
		{"SELECT UUID(), c INTO @a, @b FROM t WHERE id = @k", "[{a [k] true true} {b [k] true true}]", "[]"},
		{"SELECT @n := @n + 1 FROM t", "[{n [n] false false}]", "[]"},
		{"SELECT 'a@b' FROM t", "[]", "[]"},
		{"SET @x = 1; INSERT INTO t VALUES (@x)", "[{x [] false false}]", "[x]"},
		{"SET @a = (@b := UUID())", "[{b [] true false} {a [] true false}]", "[]"},
		{"SET GLOBAL max_connections = 10, @g = 2", "[{g [] false false}]", "[]"},
		{"SET NAMES utf8mb4, @n = UUID()", "[{n [] true false}]", "[]"},
		{"CREATE DEFINER = app PROCEDURE p() BEGIN SELECT 1 INTO @u; SET @v = 'x'; END", "[]", "[]"},
		// A routine may assign what it is given (OUT, INOUT): its body is
		// not in the capture.
		{"CALL p(1, @Out, @k + 1, f(@j), @out)", "[{out [out] true true}]", "[out k j out]"},
		{"CALL p", "[]", "[]"},
		{"CALL db.p(@a, @@sql_mode)", "[{a [a] true true}]", "[a]"},
		{"CALL p(@a, (@b), f(@c, @d), @e)", "[{a [a] true true} {e [e] true true}]", "[a b c d e]"},
	} {
		as, rs, ok := UserVarFlow(c.sql)
		if !ok {
			t.Errorf("%q: not read", c.sql)
		}
		if got := fmt.Sprint(as); got != c.assigns {
			t.Errorf("%q assigns %s, want %s", c.sql, got, c.assigns)
		}
		if got := fmt.Sprint(rs); got != c.read {
			t.Errorf("%q reads %s, want %s", c.sql, got, c.read)
		}
	}
}

func TestUserVarFlowUnreadable(t *testing.T) {
	if _, _, ok := UserVarFlow("SET @doc = '{\"cut short"); !ok {
		return
	}
	t.Error("a text cut inside a string: read, want not read")
}

func TestCallArguments(t *testing.T) {
	for sql, want := range map[string]string{
		"CALL shop.mk(1, @Out, f(@x), @out)": "shop mk [ out  out] true",
		"CALL `p`()":                         " p [] true",
		"CALL p":                             " p [] true",
		"SELECT 1":                           "  [] false",
	} {
		s, n, args, ok := CallArguments(sql)
		if got := fmt.Sprintf("%s %s %v %v", s, n, args, ok); got != want {
			t.Errorf("CallArguments(%q) = %q, want %q", sql, got, want)
		}
	}
}
