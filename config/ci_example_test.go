package config

import (
	"os"
	"regexp"
	"testing"
)

// TestCIExampleVariables: every PEAL_* variable the CI example of docs/ci.md
// sets is a configuration variable, so the example cannot rot silently.
func TestCIExampleVariables(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../docs/examples/peal-tickets.yml")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, k := range Keys {
		known[k.Env()] = true
	}
	vars := regexp.MustCompile(`\bPEAL_[A-Z0-9_]+`).FindAllString(string(data), -1)
	if len(vars) < 5 {
		t.Fatalf("the example sets only %d variables", len(vars))
	}
	for _, v := range vars {
		if !known[v] {
			t.Errorf("the CI example sets %s, which is no configuration variable", v)
		}
	}
}
