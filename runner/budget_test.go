package runner

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines bounds the non-test Go of package runner: the run's policy (the
// order of things, what a run decides) fits in it, and mechanism goes to
// the package that owns it (docs/architecture.md).
const maxLines = 3200

// TestLineBudget: runner's non-test Go files hold at most maxLines lines,
// counted as `cat runner/*.go | wc -l` counts them (tests aside), so that
// the package cannot grow back unnoticed.
func TestLineBudget(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	lines, counted := 0, 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines += bytes.Count(data, []byte("\n"))
		counted++
	}
	if counted < 10 {
		t.Fatalf("counted %d files of package runner: run the test from its folder", counted)
	}
	if lines > maxLines {
		t.Errorf("package runner has %d lines of non-test Go, over its budget of %d: move mechanism to the package that owns it (docs/architecture.md), keeping here only what a run decides", lines, maxLines)
	}
	t.Logf("package runner: %d lines of non-test Go in %d files (budget %d)", lines, counted, maxLines)
}
