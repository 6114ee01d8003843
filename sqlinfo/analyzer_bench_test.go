package sqlinfo

import (
	"fmt"
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
