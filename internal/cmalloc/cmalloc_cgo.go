//go:build linux && cgo

package cmalloc

/*
#include <malloc.h>

static int limit_arenas(int n) {
#ifdef M_ARENA_MAX
	return mallopt(M_ARENA_MAX, n);
#else
	return 0;
#endif
}

static int fix_mmap_threshold(int n) {
#ifdef M_MMAP_THRESHOLD
	return mallopt(M_MMAP_THRESHOLD, n);
#else
	return 0;
#endif
}
*/
import "C"

// limitArenas sets glibc's M_ARENA_MAX: true when it took.
func limitArenas(n int) bool { return C.limit_arenas(C.int(n)) == 1 }

// fixMmapThreshold sets glibc's M_MMAP_THRESHOLD, which also ends its
// dynamic raising: true when it took.
func fixMmapThreshold(n int) bool { return C.fix_mmap_threshold(C.int(n)) == 1 }
