// Package textclip shortens text for messages, labels and report cells:
// one definition, which never cuts a UTF-8 sequence in two.
package textclip

import "unicode/utf8"

// Clip returns s if it has at most n characters (runes), else its first
// n-1 followed by "…". n < 1 is taken as 1.
func Clip(s string, n int) string {
	n = max(n, 1)
	if len(s) <= n || utf8.RuneCountInString(s) <= n {
		return s
	}
	i, k := 0, 0
	for k < n-1 {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		k++
	}
	return s[:i] + "…"
}
