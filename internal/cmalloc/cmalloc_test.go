package cmalloc

import (
	"os"
	"strings"
	"testing"
)

// On this project's machines (Debian, glibc, cgo) the limit takes, unless
// the environment set its own.
func TestArenasAreLimited(t *testing.T) {
	if _, set := os.LookupEnv("MALLOC_ARENA_MAX"); set {
		if Limited {
			t.Fatal("MALLOC_ARENA_MAX is set, yet the arenas were limited over it")
		}
		t.Skip("MALLOC_ARENA_MAX is set: glibc uses it")
	}
	if !Limited {
		t.Fatalf("glibc's arenas were not limited to %d (cgo off, or no M_ARENA_MAX)", Arenas)
	}
	if !limitArenas(Arenas) {
		t.Fatal("mallopt(M_ARENA_MAX) refused")
	}
}

// The mmap threshold is fixed too (glibc then no longer raises it).
func TestMmapThresholdIsFixed(t *testing.T) {
	if _, set := os.LookupEnv("MALLOC_MMAP_THRESHOLD_"); set {
		t.Skip("MALLOC_MMAP_THRESHOLD_ is set: glibc uses it")
	}
	if strings.Contains(os.Getenv("GLIBC_TUNABLES"), "mmap_threshold") {
		t.Skip("GLIBC_TUNABLES sets the mmap threshold: glibc uses it")
	}
	if !MmapFixed {
		t.Fatalf("glibc's mmap threshold was not fixed at %d (cgo off, or no M_MMAP_THRESHOLD)", MmapThreshold)
	}
}
