package tickets

import (
	"os"
	"testing"

	"peal/internal/testkit/testbin"
)

// TestMain gives the tests' scratch folders a memory file system when there
// is one (testbin.UseMemoryTemp).
func TestMain(m *testing.M) { os.Exit(testbin.Main(m, nil)) }

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}
