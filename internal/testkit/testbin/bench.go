package testbin

import (
	"os"
	"testing"
)

// BenchPlaces runs a benchmark in each of the places the worktree
// benchmarks measure: the temporary folder the process was given (a disk)
// and a memory folder (BenchTmpfs); each run gets a fresh folder (BenchDir).
func BenchPlaces(b *testing.B, run func(b *testing.B, dir string)) {
	for _, where := range []struct{ name, parent string }{{"disk", DiskTemp}, {"tmpfs", BenchTmpfs()}} {
		b.Run(where.name, func(b *testing.B) { run(b, BenchDir(b, where.parent)) })
	}
}

// BenchDir is a fresh folder in parent, removed after the benchmark; the
// benchmark is skipped where parent does not exist.
func BenchDir(b *testing.B, parent string) string {
	if _, err := os.Stat(parent); err != nil {
		b.Skipf("no %s here", parent)
	}
	dir, err := os.MkdirTemp(parent, "peal-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// BenchTmpfs is where the benchmarks' memory cases run: PEAL_BENCH_DIR, or
// /dev/shm.
func BenchTmpfs() string {
	if dir := os.Getenv("PEAL_BENCH_DIR"); dir != "" {
		return dir
	}
	return "/dev/shm"
}
