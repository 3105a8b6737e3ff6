//go:build !linux

package confine

func probe() Support {
	return supportOf(0, "files and TCP are confined on Linux only")
}
