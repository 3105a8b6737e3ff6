package review

import (
	"os"
	"testing"

	"peal/internal/testkit/testbin"
)

// TestMain gives the tests' scratch folders a memory file system when there
// is one (testbin.UseMemoryTemp).
func TestMain(m *testing.M) { os.Exit(testbin.Main(m, nil)) }
