package state

import (
	"fmt"
	"path/filepath"
	"strings"
)

// WriteCloseSummary writes dir/close-summary.md in the shape tf's detection
// reads: a Status section saying CLOSED or BLOCKED and the five severity
// counts. It is written atomically, so detection never sees half a file. A
// negative count is refused: detection reads only digits and would not read
// it back.
func WriteCloseSummary(dir string, blocked bool, counts Counts) error {
	status := "CLOSED"
	if blocked {
		status = "BLOCKED"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## Status\n**%s**\n\n## Summary Statistics\n", status)
	for _, sc := range []struct {
		name string
		n    int
	}{
		{"Critical", counts.Critical},
		{"Major", counts.Major},
		{"Minor", counts.Minor},
		{"Warnings", counts.Warnings},
		{"Suggestions", counts.Suggestions},
	} {
		if sc.n < 0 {
			return fmt.Errorf("close summary in %s: the %s count %d is negative", dir, sc.name, sc.n)
		}
		fmt.Fprintf(&b, "- %s: %d\n", sc.name, sc.n)
	}
	return WriteFileAtomic(filepath.Join(dir, CloseSummaryFile), []byte(b.String()), 0o644)
}
