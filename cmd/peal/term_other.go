//go:build !linux

package main

import "os"

// isTerminal reports whether f is a character device: without the Linux
// ioctl this is the best guess the standard library allows.
func isTerminal(f *os.File) bool {
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// terminalWidth is unknown here; the display assumes 80 columns.
func terminalWidth(*os.File) int { return 0 }
