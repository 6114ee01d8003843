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
	// Replica: the profile is one of the replication topology's replicas
	// (Replicate seeds it from the primary and starts replication).
	Replica bool
}

// The replication topology (the seeds' own): an InnoDB primary with a
// binary log and GTIDs, and replicas on each engine, each with a server id
// of its own. 'tandem sandbox up --topology replication' starts them and
// 'tandem sandbox replicate' seeds the replicas from the primary.
var (
	binlogOptions = []string{"--log-bin=primary-bin", "--binlog-format=ROW", "--gtid-strict-mode=ON", "--log-slave-updates", "--binlog-annotate-row-events=ON"}
	rocksOptions  = []string{"--plugin-load-add=ha_rocksdb.so", "--default-storage-engine=ROCKSDB"}
	// ReplicationProfiles are the topology's profiles, the primary first.
	ReplicationProfiles = []string{"primary", "replica-innodb", "replica-rocksdb", "replica-zstd", "reference"}
)

var profiles = map[string]Profile{
	"innodb": {
		Name:    "innodb",
		Engine:  "InnoDB",
		Options: []string{"--default-storage-engine=InnoDB"},
		Package: "mariadb-server",
	},
	// Table names that ignore case, as MySQL on Windows and macOS and
	// servers set so in production: `Orders` and `orders` are one table.
	"innodb-lower-case": {
		Name:    "innodb-lower-case",
		Engine:  "InnoDB",
		Options: []string{"--default-storage-engine=InnoDB", "--lower-case-table-names=1"},
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
	"primary": {
		Name:    "primary",
		Engine:  "InnoDB",
		Options: append([]string{"--server-id=1", "--default-storage-engine=InnoDB"}, binlogOptions...),
		Package: "mariadb-server",
	},
	"replica-innodb": {
		Name: "replica-innodb", Engine: "InnoDB", Replica: true, Package: "mariadb-server",
		Options: []string{"--server-id=2", "--default-storage-engine=InnoDB"},
	},
	"replica-rocksdb": {
		Name: "replica-rocksdb", Engine: "ROCKSDB", Replica: true, Package: "mariadb-plugin-rocksdb",
		Options: append([]string{"--server-id=3"}, rocksOptions...),
	},
	// MyRocks compressed, as the seeds' runs: zstd column families.
	"replica-zstd": {
		Name: "replica-zstd", Engine: "ROCKSDB", Replica: true, Package: "mariadb-plugin-rocksdb",
		Options: append([]string{"--server-id=4", "--rocksdb-default-cf-options=compression=kZSTDNotFinalCompression;bottommost_compression=kZSTDNotFinalCompression"}, rocksOptions...),
	},
	// An InnoDB replica to stop at a capture's end: production's end state.
	"reference": {
		Name: "reference", Engine: "InnoDB", Replica: true, Package: "mariadb-server",
		Options: []string{"--server-id=5", "--default-storage-engine=InnoDB"},
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
