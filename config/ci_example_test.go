package config

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"peal/agent"
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

// TestAgentKindEnum: the kinds the configuration accepts are the kinds the
// agent package has.
func TestAgentKindEnum(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"agent_kind", "fallback_agent_kind"} {
		k, _ := KeyByName(name)
		if !slices.Equal(slices.Sorted(slices.Values(k.Enum)), slices.Sorted(slices.Values(agent.Names()))) {
			t.Errorf("%s accepts %v, the agent kinds are %v", name, k.Enum, agent.Names())
		}
	}
}
