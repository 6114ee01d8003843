package sqldigest

import "testing"

func TestSameShapeSameDigest(t *testing.T) {
	cases := []struct {
		a, b string
		same bool
	}{
		{"SELECT c FROM sbtest1 WHERE id=5", "select c from sbtest1 where id = ?", true},
		{"SELECT c FROM sbtest1 WHERE id=5", "SELECT c FROM sbtest1 WHERE id=99999", true},
		{"UPDATE sbtest3 SET c='12-34' WHERE id=1", "UPDATE sbtest3 SET c=? WHERE id=?", true},
		{"SELECT c FROM sbtest1 WHERE id=5", "SELECT c FROM sbtest2 WHERE id=5", false},
		{"BEGIN", "COMMIT", false},
	}
	for _, c := range cases {
		da, db := Of(c.a), Of(c.b)
		if (da.ID == db.ID) != c.same {
			t.Errorf("Of(%q)=%s/%q, Of(%q)=%s/%q: same=%v, want %v", c.a, da.Short(), da.Text, c.b, db.Short(), db.Text, da.ID == db.ID, c.same)
		}
	}
	d := Of("SELECT c FROM sbtest1 WHERE id=5")
	if d.Text != "select `c` from `sbtest1` where `id` = ?" || len(d.ID) != 64 || len(d.Short()) != 16 {
		t.Errorf("Of = %+v", d)
	}
}
