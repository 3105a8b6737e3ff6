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
	for _, name := range Severities {
		n := counts.Of(name)
		if n < 0 {
			return "", fmt.Errorf("the %s count %d is negative", name, n)
		}
		fmt.Fprintf(&b, "- %s: %d\n", name, n)
	}
	return b.String(), nil
}
