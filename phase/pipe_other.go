//go:build !linux

package phase

import "os"

// pipe makes a pipe between peal and a child; pealReads tells which end is
// peal's.
func pipe(pealReads bool) (peal, child *os.File, err error) {
	r, w, err := os.Pipe()
	if pealReads {
		return r, w, err
	}
	return w, r, err
}
