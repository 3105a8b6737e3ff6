package tickets

import (
	"fmt"
	"strings"
	"unicode"
)

// FailedCheck is a check of the project that still failed when an attempt
// ended, as close-summary.md lists it.
type FailedCheck struct {
	Command  string
	Result   string // how it ended: "exited with status 1"
	LastLine string // the last line of its output that explains it
}

// CloseSummary is the text of close-summary.md in the shape tf's detection
// reads: a Status section saying CLOSED or BLOCKED and the five severity
// counts, then, when there are any, the checks that still failed (which
// make the attempt BLOCKED), after the counts so that detection reads the
// counts first whatever a check printed. A negative count is refused:
// detection reads only digits and would not read it back.
func CloseSummary(blocked bool, counts Counts, checks ...FailedCheck) (string, error) {
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
	if len(checks) > 0 {
		b.WriteString("\n## Failed Checks\n")
		for _, c := range checks {
			fmt.Fprintf(&b, "- `%s` %s", oneLine(c.Command), oneLine(c.Result))
			if line := oneLine(c.LastLine); line != "" {
				fmt.Fprintf(&b, ": %s", line)
			}
			b.WriteByte('\n')
		}
	}
	return b.String(), nil
}

// oneLine is s on one line, without control characters, cut to 300
// characters: a line of a list item, whatever a check printed.
func oneLine(s string) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	if r := []rune(s); len(r) > 300 {
		s = string(r[:300]) + "…"
	}
	return s
}
