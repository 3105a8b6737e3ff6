package state

import (
	"fmt"
	"strings"
)

// CloseSummary is the text of close-summary.md in the shape tf's detection
// reads: a Status section saying CLOSED or BLOCKED and the five severity
// counts. A negative count is refused: detection reads only digits and would
// not read it back.
func CloseSummary(blocked bool, counts Counts) (string, error) {
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
			return "", fmt.Errorf("the %s count %d is negative", sc.name, sc.n)
		}
		fmt.Fprintf(&b, "- %s: %d\n", sc.name, sc.n)
	}
	return b.String(), nil
}
