package config

import (
	"path/filepath"
	"peal/tickets"
	"regexp"
	"testing"
)

// TestDefaultTicketPrefixIsPerPlan: plans whose names reduce to the same
// letters, or that share a name in different folders, get different tickets;
// a plan keeps its prefix wherever the repository is.
func TestDefaultTicketPrefixIsPerPlan(t *testing.T) {
	t.Parallel()
	repo := filepath.Join("/", "work", "repo")
	prefix := func(rel string) string { return DefaultTicketPrefix(filepath.Join(repo, rel), repo) }
	form := regexp.MustCompile(`^[a-z]{1,12}[a-z]{5}$`)
	seen := map[string]string{}
	for _, rel := range []string{"feature1.md", "feature2.md", "x/plan.md", "y/plan.md", "plan.md", "../plan.md", "docs/a-very-long-plan-name-indeed.md", "123.md"} {
		p := prefix(rel)
		if !form.MatchString(p) || !tickets.ValidID(p+"-12") {
			t.Errorf("%s: prefix %q does not give ticket ids", rel, p)
		}
		if other, dup := seen[p]; dup {
			t.Errorf("%s and %s share the prefix %q", rel, other, p)
		}
		seen[p] = rel
	}
	for rel, name := range map[string]string{"feature1.md": "feature", "x/plan.md": "plan", "docs/a-very-long-plan-name-indeed.md": "averylongpla", "123.md": "task"} {
		if p := prefix(rel); p[:len(p)-5] != name {
			t.Errorf("%s: prefix %q, want %q and five letters", rel, p, name)
		}
	}
	moved := filepath.Join("/", "elsewhere", "checkout")
	if a, b := prefix("x/plan.md"), DefaultTicketPrefix(filepath.Join(moved, "x", "plan.md"), moved); a != b {
		t.Errorf("the prefix changed with the repository's place: %q, %q", a, b)
	}
}
