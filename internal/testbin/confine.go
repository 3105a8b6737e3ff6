package testbin

import "os"

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
