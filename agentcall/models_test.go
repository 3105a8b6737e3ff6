package agentcall

import (
	"testing"

	"peal/config"
	"peal/phase"
)

// TestModelFor: the model of a call is a function of the attempt and the
// phase alone (ticketflow's escalation curve), with the base model wherever no
// escalation model is configured.
func TestModelFor(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{Model: "base", EscalationEnabled: true, EscalationFixer: "fixer", EscalationWorker: "worker"}
	cases := []struct {
		attempt   int
		phase     string
		want, key string
	}{
		{0, "address", "base", "model"}, {1, "address", "base", "model"}, {2, "address", "fixer", "escalation.fixer"},
		{2, "execute", "base", "model"}, {3, "execute", "worker", "escalation.worker"}, {3, "plan", "worker", "escalation.worker"},
		{3, "triage", "base", "model"}, {4, "normalize", "base", "model"},
	}
	for _, tc := range cases {
		if got, key := ModelFor(cfg, tc.attempt, phase.Name(tc.phase)); got != tc.want || key != tc.key {
			t.Errorf("attempt %d, %s: %q set by %q, want %q set by %q", tc.attempt, tc.phase, got, key, tc.want, tc.key)
		}
	}
	second := *cfg
	second.EscalationSecondOpinion = "second"
	if got, key := ModelFor(&second, 3, "triage"); got != "second" || key != "escalation.reviewer_second_opinion" {
		t.Errorf("triage on attempt 3: %q set by %q", got, key)
	}
	if got, key := ModelFor(&config.Config{}, 0, "plan"); got != "" || key != "" {
		t.Errorf("no model: %q set by %q", got, key)
	}
	off := *cfg
	off.EscalationEnabled = false
	if got, _ := ModelFor(&off, 3, "execute"); got != "base" {
		t.Errorf("escalation off: %q", got)
	}
}
