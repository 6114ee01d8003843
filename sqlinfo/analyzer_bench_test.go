package sqlinfo

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// What the analyzer costs a replay of text statements (the text
// protocol, or the writes that bypassed the proxy rebuilt as SQL): a
// point statement with literal keys is parsed once per distinct text
// (its Info holds its literals; identical texts hit the text cache), one
// with parameters once per digest.
// go test -bench Analyzer ./sqlinfo
func BenchmarkAnalyzerInfo(b *testing.B) {
	texts := make([]string, 10000)
	for i := range texts {
		texts[i] = fmt.Sprintf("UPDATE sbtest1 SET k = k + 1 WHERE id = %d", i)
	}
	b.Run("literal keys, 10000 texts", func(b *testing.B) {
		a := NewAnalyzer()
		for i := 0; b.Loop(); i++ {
			a.Info(texts[i%len(texts)])
		}
	})
	b.Run("literal keys, every text new", func(b *testing.B) {
		a := NewAnalyzer()
		for i := 0; b.Loop(); i++ {
			a.Info(fmt.Sprintf("UPDATE sbtest1 SET k = k + 1 WHERE id = %d", i))
		}
	})
	b.Run("parameters, one text", func(b *testing.B) {
		a := NewAnalyzer()
		for b.Loop() {
			a.Info("UPDATE sbtest1 SET k = k + 1 WHERE id = ?")
		}
	})
}

// What looking for secrets costs every text statement a capture records
// (MaskSecrets runs on each COM_QUERY and COM_STMT_PREPARE): most carry
// no hint word and are not lexed at all.
// go test -bench MaskSecrets ./sqlinfo
func BenchmarkMaskSecrets(b *testing.B) {
	for _, c := range []struct{ name, sql string }{
		{"point select", "SELECT c FROM sbtest1 WHERE id=5021"},
		{"update non-index", "UPDATE sbtest3 SET c='83868641912-28773972837-60736120486-75162659906-27563526494-20381887404-41576422241-93426793964-56405065102-33518432330' WHERE id=4997"},
		{"insert", "INSERT INTO sbtest2 (id, k, c, pad) VALUES (5013, 4981, '68487932199-96439406143-93774651418-41631865787-96406072701-20604855487-25459966574-28203206787-41238978918-19503783441', '22195207048-70116052123-74140395089-76317954521-98694025897')"},
		{"insert into users (lexed: a hint word)", "INSERT INTO users (user_id, name, email, note) VALUES (17, 'Bob', 'bob@example.com', 'prefers mail'), (18, 'Ann', 'ann@example.com', 'none')"},
		{"create user", "CREATE USER 'app'@'%' IDENTIFIED BY 's3cr3t'"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				MaskSecrets(c.sql)
			}
		})
	}
}

// BenchmarkAnalyzeInList analyses an UPDATE by an IN list of n ids (a
// batch job's statement): the time per value should not grow with n
// (it grew linearly, each value compared with those before it).
func BenchmarkAnalyzeInList(b *testing.B) {
	for _, n := range []int{10, 200, 2000} {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = strconv.Itoa(i*7919%100003 + 1)
		}
		sql := "UPDATE sbtest1 SET k = k + 1 WHERE id IN (" + strings.Join(ids, ",") + ")"
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				Analyze(sql)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/value")
		})
	}
}
