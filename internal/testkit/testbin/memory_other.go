//go:build !linux

package testbin

const memoryTemp = ""

// roomyTmpfs: outside Linux the tests keep the system's temporary folder.
func roomyTmpfs(string, uint64) bool { return false }
