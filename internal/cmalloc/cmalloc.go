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
// glibc also raises its mmap threshold, from 128 KiB up to 32 MiB, each
// time a block it had mapped on its own is freed: blocks that size come
// from the arenas from then on, and what they free there stays resident,
// in pieces. Pebble frees such blocks now and then (memtables outgrown as
// they double from 256 KiB, among others), so the arenas grew with the
// replay's length: on a 64-session replay of 200,000 records, from 2.8 to
// 7.5 MB (5.9 MB of it free) in 30 s, against 3.0 to 3.9 MB with the
// threshold fixed.
//
// Importing the package limits the arenas to Arenas, unless the user set
// MALLOC_ARENA_MAX (glibc then uses that), and fixes the mmap threshold at
// MmapThreshold, unless the user set MALLOC_MMAP_THRESHOLD_ or
// GLIBC_TUNABLES. Without cgo, or on a C library without the settings, it
// does nothing: Pebble then allocates from Go's heap or the C library's own
// way.
package cmalloc

import (
	"os"
	"strings"
)

// Arenas is the most arenas glibc's malloc creates.
const Arenas = 2

// MmapThreshold is the size from which glibc's malloc maps a block on its
// own (and unmaps it when freed): glibc's initial value, kept.
const MmapThreshold = 128 << 10

// Limited reports whether the arenas were limited here (false: the user's
// MALLOC_ARENA_MAX applies, or the C library has no such setting).
var Limited bool

// MmapFixed reports whether the mmap threshold was fixed here.
var MmapFixed bool

func init() {
	if _, set := os.LookupEnv("MALLOC_ARENA_MAX"); !set {
		Limited = limitArenas(Arenas)
	}
	_, set := os.LookupEnv("MALLOC_MMAP_THRESHOLD_")
	if !set && !strings.Contains(os.Getenv("GLIBC_TUNABLES"), "mmap_threshold") {
		MmapFixed = fixMmapThreshold(MmapThreshold)
	}
}
