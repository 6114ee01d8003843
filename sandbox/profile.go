package sandbox

import (
	"fmt"
	"sort"
	"strings"
)

// A Profile is a named kind of sandboxed server: what makes it different
// from the others is its default storage engine and the plugins it loads.
type Profile struct {
	Name string
	// Engine is the server's default storage engine, as SHOW ENGINES names it.
	Engine string
	// Options are the server options that make the profile, added after the
	// sandbox's common options and before the user's --server-option values.
	Options []string
	// Package is the Debian package that provides what the profile needs
	// beyond mariadb-server; named in errors when the server will not start.
	Package string
}

var profiles = map[string]Profile{
	"innodb": {
		Name:    "innodb",
		Engine:  "InnoDB",
		Options: []string{"--default-storage-engine=InnoDB"},
		Package: "mariadb-server",
	},
	"rocksdb": {
		Name:   "rocksdb",
		Engine: "ROCKSDB",
		Options: []string{
			"--plugin-load-add=ha_rocksdb.so",
			"--default-storage-engine=ROCKSDB",
		},
		Package: "mariadb-plugin-rocksdb",
	},
}

// DefaultProfiles are the profiles started when none are named.
var DefaultProfiles = []string{"innodb", "rocksdb"}

// ProfileNames lists the known profiles in a stable order.
func ProfileNames() []string {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// LookupProfile returns the named profile or an error wrapping
// ErrUnknownProfile that lists the known ones.
func LookupProfile(name string) (Profile, error) {
	p, ok := profiles[strings.ToLower(name)]
	if !ok {
		return Profile{}, fmt.Errorf("%w %q (known profiles: %s)", ErrUnknownProfile, name, strings.Join(ProfileNames(), ", "))
	}
	return p, nil
}
