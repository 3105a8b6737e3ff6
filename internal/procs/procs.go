// Package procs is about processes: how many threads run peal's own Go
// code at once, and whether another process is still alive.
package procs

import (
	"os"
	"runtime"
)

// Limit runs peal's Go code on one thread at a time (GOMAXPROCS 1), unless
// the environment sets GOMAXPROCS. peal spends its time waiting for its
// children, with short bookkeeping between one's end and the next one's
// start; with a second processor the Go runtime wakes a second thread at
// almost every hand-off between goroutines (a child's output read, its
// exit, a timer), which costs more CPU time than it saves and delays the
// hand-off itself. The children still run on every core.
func Limit() {
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		runtime.GOMAXPROCS(1)
	}
}
