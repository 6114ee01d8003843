// Package cmalloc bounds the C heap's arenas, for the memory Pebble
// allocates outside Go's heap (memtables, block caches).
//
// glibc's malloc gives each thread that allocates while another holds an
// arena a new one, up to 8 per core, and keeps what is freed in each.
// Pebble allocates its memtables and cached blocks with C's malloc (with
// cgo) from whichever OS thread its goroutine runs on; a replay at width
// and a proxy that relays for days run on dozens of threads. Measured on
// a 64-session replay of 805,000 records (2 cores): the resident set
// crept from 162 MB at 16 s to 178 MB at 55 s with glibc's default, and
// stayed at 160–162 MB with 2 arenas, the Go heap being the same in both.
//
// Importing the package limits the arenas to Arenas, unless the user set
// MALLOC_ARENA_MAX (glibc then uses that). Without cgo, or on a C library
// without the setting, it does nothing: Pebble then allocates from Go's
// heap or the C library's own way.
package cmalloc

import "os"

// Arenas is the most arenas glibc's malloc creates.
const Arenas = 2

// Limited reports whether the arenas were limited here (false: the user's
// MALLOC_ARENA_MAX applies, or the C library has no such setting).
var Limited bool

func init() {
	if _, set := os.LookupEnv("MALLOC_ARENA_MAX"); set {
		return
	}
	Limited = limitArenas(Arenas)
}
