// Package charset turns text a client sent in its connection's character
// set (character_set_client: the handshake's collation, then SET NAMES,
// SET CHARACTER SET or SET character_set_client) into UTF-8, for the names
// a statement gives tables and schemas: information_schema and every
// query replay sends on its own connections speak utf8mb4, and reports
// print UTF-8. Statements themselves are replayed as captured, in the
// captured session's own character set.
package charset

import (
	"strings"
	"unicode/utf8"

	"github.com/tandemdb/tandem/sqlinfo"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
)

// byName maps MariaDB and MySQL client character sets whose bytes are not
// UTF-8 to their encodings. ASCII-compatible sets only: a client never
// sends ucs2, utf16 or utf32. (MariaDB's latin1 is Windows-1252.)
var byName = map[string]encoding.Encoding{
	"latin1": charmap.Windows1252, "latin2": charmap.ISO8859_2, "latin5": charmap.ISO8859_9, "latin7": charmap.ISO8859_13,
	"cp1250": charmap.Windows1250, "cp1251": charmap.Windows1251, "cp1256": charmap.Windows1256, "cp1257": charmap.Windows1257,
	"koi8r": charmap.KOI8R, "koi8u": charmap.KOI8U, "greek": charmap.ISO8859_7, "hebrew": charmap.ISO8859_8,
	"cp866": charmap.CodePage866, "cp850": charmap.CodePage850, "macroman": charmap.Macintosh,
	"sjis": japanese.ShiftJIS, "cp932": japanese.ShiftJIS, "ujis": japanese.EUCJP, "eucjpms": japanese.EUCJP,
	"gbk": simplifiedchinese.GBK, "gb2312": simplifiedchinese.GBK, "gb18030": simplifiedchinese.GB18030,
	"big5": traditionalchinese.Big5, "euckr": korean.EUCKR,
}

// utf8Sets are the sets whose bytes are UTF-8 (or ASCII) already.
var utf8Sets = map[string]bool{"utf8": true, "utf8mb3": true, "utf8mb4": true, "ascii": true, "binary": true}

// Set is a client character set; the zero Set is UTF-8.
type Set struct {
	name string
	enc  encoding.Encoding
}

// Named returns the set called name (any case, quoted or not, with a
// COLLATE clause after it as SET NAMES takes one); ok is false for a name
// this package does not know, which is then taken as UTF-8.
func Named(name string) (Set, bool) {
	n := strings.ToLower(strings.TrimSpace(name))
	if i := strings.IndexAny(n, " \t\n"); i >= 0 {
		n = n[:i]
	}
	n = strings.Trim(n, "'\"`")
	if utf8Sets[n] {
		return Set{}, true
	}
	if e, ok := byName[n]; ok {
		return Set{name: n, enc: e}, true
	}
	return Set{}, false
}

// OfCollation returns the set of a handshake's collation id; ok is false
// for an id this package does not know (taken as UTF-8).
func OfCollation(id byte) (Set, bool) {
	n, ok := collations[id]
	if !ok {
		return Set{}, id == 0 // no collation given: the server's default
	}
	return Named(n)
}

// Name is the set's name ("utf8mb4" for UTF-8).
func (s Set) Name() string {
	if s.enc == nil {
		return "utf8mb4"
	}
	return s.name
}

// ToUTF8 returns text, sent in s, as UTF-8. Pure ASCII text, and any
// text of a UTF-8 set, is returned as it is; bytes the set cannot decode
// become U+FFFD.
func (s Set) ToUTF8(text string) string {
	if s.enc == nil || isASCII(text) {
		return text
	}
	out, err := s.enc.NewDecoder().String(text)
	if err != nil || !utf8.ValidString(out) {
		return strings.ToValidUTF8(text, "\uFFFD")
	}
	return out
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// Session follows one client session's character_set_client through its
// records: the handshake's collation, then SET NAMES, SET CHARACTER SET
// and SET character_set_client; COM_RESET_CONNECTION goes back to the
// handshake's. The zero Session is UTF-8.
type Session struct {
	Set  // the current one
	conn Set
}

// Connect starts the session (a connect or change-user record) with the
// handshake's collation id (0: not captured, left as it was).
func (s *Session) Connect(collation byte) {
	if collation != 0 {
		s.conn, _ = OfCollation(collation)
		s.Set = s.conn
	}
}

// Reset goes back to the handshake's set (COM_RESET_CONNECTION).
func (s *Session) Reset() { s.Set = s.conn }

// Statement follows a statement the server accepted: a SET of the
// client's character set changes it (to UTF-8 when the set is one this
// package does not know).
func (s *Session) Statement(sql string) {
	if !isSet(sql) {
		return
	}
	as, ok := sqlinfo.SetAssignments(sql)
	if !ok {
		return
	}
	for _, a := range as {
		if a.Name == "names" || a.Name == "character_set_client" {
			s.Set, _ = Named(a.Value)
		}
	}
}

// isSet is a quick look for a statement that may set the client's
// character set: short, and naming NAMES or CHARACTER or CHARSET.
func isSet(sql string) bool {
	if len(sql) > 512 {
		return false
	}
	l := strings.ToLower(sql)
	return strings.Contains(l, "set") && (strings.Contains(l, "names") || strings.Contains(l, "char"))
}
