package agent

import (
	"slices"
	"testing"
)

// The rules built for a configuration are reused while it stays the same,
// and never stand for another one.
func TestRulesFollowTheConfiguration(t *testing.T) {
	k := &Kind{Name: "rules-test"}
	a := UserPatterns{Fatal: []string{"Quota Gone"}, Builtin: true}
	b := UserPatterns{Fatal: []string{"quota", "gone"}, Builtin: true}
	ra := k.rulesOf(a)
	if k.rulesOf(a) != ra {
		t.Error("the same configuration built its rules again")
	}
	rb := k.rulesOf(b)
	if rb == ra || !slices.Equal(rb.fatal[len(rb.fatal)-2:], []string{"quota", "gone"}) {
		t.Errorf("rules of another configuration: %q", rb.fatal)
	}
	if ra2 := k.rulesOf(a); !slices.Contains(ra2.fatal, "quota gone") || slices.Contains(ra2.fatal, "gone") {
		t.Errorf("rules back on the first configuration: %q", ra2.fatal)
	}
	if k.rulesOf(UserPatterns{Fatal: []string{"Quota Gone"}}).kind != k || len(k.rulesOf(UserPatterns{Fatal: []string{"Quota Gone"}}).fatal) != 1 {
		t.Error("without the built-in patterns the rules must hold the user's only")
	}
}
