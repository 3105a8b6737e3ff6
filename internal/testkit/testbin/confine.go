package testbin

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ConfineEnv names the variable that sets the confine setting of the
// tests that drive whole runs (the runner's and cmd/peal's behaviour
// tests): "auto", the default of a user's run, or "off". A run behaves
// the same under both, so the suite is run under each (.ci/run does), and
// a difference fails a test.
const ConfineEnv = "PEAL_TEST_CONFINE"

// ConfineMode is the confine setting of the behaviour tests: ConfineEnv's
// value, else "auto".
func ConfineMode() string {
	if v := os.Getenv(ConfineEnv); v != "" {
		return v
	}
	return "auto"
}

// ReadPaths are the folders of the programs bins, comma separated, as
// confine_read_paths takes them: the go command's cache, where they are,
// lies in the home folder of the user running the tests, which a confined
// call of a run with another HOME reads only where allowed.
func ReadPaths(bins map[string]string) string {
	var dirs []string
	for _, p := range bins {
		if d := filepath.Dir(p); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	slices.Sort(dirs)
	return strings.Join(dirs, ",")
}
