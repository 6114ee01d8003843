package capture

import (
	"strings"
)

// secretStatements start statements that can carry a password.
var secretStatements = []string{
	"CREATE USER", "ALTER USER", "SET PASSWORD", "GRANT", "CREATE ROLE",
	"CHANGE MASTER", "CHANGE REPLICATION SOURCE", "CREATE SERVER", "ALTER SERVER",
	"START SLAVE", "START REPLICA",
}

// CarriesSecret reports whether sql is a statement that can carry a
// password (checked on its first words, comments and case ignored).
func CarriesSecret(sql string) bool {
	s := skipSpaceAndComments(sql)
	// Compare word by word so "GRANT\n  SELECT" and "CREATE  USER" match.
	words := strings.Fields(strings.ToUpper(s[:min(len(s), 64)]))
	for _, st := range secretStatements {
		want := strings.Fields(st)
		if len(words) >= len(want) {
			match := true
			for i, w := range want {
				if words[i] != w {
					match = false
					break
				}
			}
			if match {
				return true
			}
		}
	}
	return false
}

func skipSpaceAndComments(s string) string {
	for {
		s = strings.TrimLeft(s, " \t\r\n")
		switch {
		case strings.HasPrefix(s, "/*") && !strings.HasPrefix(s, "/*!"):
			end := strings.Index(s[2:], "*/")
			if end < 0 {
				return ""
			}
			s = s[2+end+2:]
		case strings.HasPrefix(s, "-- "), strings.HasPrefix(s, "#"):
			end := strings.IndexByte(s, '\n')
			if end < 0 {
				return ""
			}
			s = s[end+1:]
		default:
			return s
		}
	}
}

// MaskSecrets returns sql with every quoted string literal of a statement
// that can carry a password replaced by '***', and whether it changed
// anything. Other statements come back as they are.
func MaskSecrets(sql string) (string, bool) {
	if !CarriesSecret(sql) {
		return sql, false
	}
	var b strings.Builder
	b.Grow(len(sql))
	masked := false
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		if c != '\'' && c != '"' {
			b.WriteByte(c)
			continue
		}
		// Skip to the closing quote, honouring backslash escapes and doubled quotes.
		j := i + 1
		for j < len(sql) {
			if sql[j] == '\\' {
				j += 2
				continue
			}
			if sql[j] == c {
				if j+1 < len(sql) && sql[j+1] == c {
					j += 2
					continue
				}
				break
			}
			j++
		}
		b.WriteString("'***'")
		masked = true
		i = j
	}
	return b.String(), masked
}
