//go:build !linux || !cgo

package cmalloc

func limitArenas(int) bool { return false }

func fixMmapThreshold(int) bool { return false }
