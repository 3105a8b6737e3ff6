package config

import (
	"slices"
	"strings"
	"testing"
)

func TestNearest(t *testing.T) {
	t.Parallel()
	names := keyNames()
	for _, tc := range []struct{ word, want string }{
		{"phase_timout_sec", "phase_timeout_sec"},
		{"plan", "plan_path"},
		{"repo", "repo_path"},
		{"PHASE-TIMEOUT-SEC", "phase_timeout_sec"},
		{"stet_paht", "stet_path"},
		{"escalation.enable", "escalation.enabled"},
		{"timeout", "phase_timeout_sec"},
		{"stet", "stet_path"},
		{"max_paralel", "max_parallel"},
		{"zzzz", ""},
		{"", ""},
		{"x", ""},
	} {
		if got := Nearest(tc.word, names); got != tc.want {
			t.Errorf("Nearest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
}

// TestUnknownTOMLKeySuggests: a key that is no key names the one meant.
func TestUnknownTOMLKeySuggests(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		"plan = \"p.md\"\n":             `unknown key "plan": did you mean plan_path?`,
		"phase_timout_sec = 5\n":        `unknown key "phase_timout_sec": did you mean phase_timeout_sec?`,
		"[escalation]\nenable = true\n": `unknown key "escalation.enable": did you mean escalation.enabled?`,
		"qqqqqqqq = 1\n":                `unknown key "qqqqqqqq" (docs/configuration.md lists every key)`,
	} {
		_, err := Load(Inputs{ConfigPath: writeTOML(t, body)})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", body, err, want)
		}
	}
}

// TestUnknownVariables: a PEAL_* variable that sets no key is one warning
// naming the variable meant; peal's other variables and empty ones are
// quiet.
func TestUnknownVariables(t *testing.T) {
	t.Parallel()
	cfg, err := Load(Inputs{Env: []string{
		"PEAL_PHASE_TIMOUT_SEC=5", "PEAL_PLAN=p.md", "PEAL_QQQQQQQQ=1", "PEAL_EMPTY=",
		"PEAL_LOG=debug", "PEAL_PHASE=plan", "PEAL_TASK_INDEX=1", "PEAL_BIN=/x", "PEAL_MAX_PARALLEL=2", "OTHER_PHASE_TIMOUT_SEC=1",
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`"PEAL_PHASE_TIMOUT_SEC" is not a peal variable and is ignored: did you mean PEAL_PHASE_TIMEOUT_SEC?`,
		`"PEAL_PLAN" is not a peal variable and is ignored: did you mean PEAL_PLAN_PATH?`,
		`"PEAL_QQQQQQQQ" is not a peal variable and is ignored (peal run --help lists them)`,
	}
	if !slices.Equal(cfg.Warnings, want) {
		t.Fatalf("warnings:\n%s\nwant:\n%s", strings.Join(cfg.Warnings, "\n"), strings.Join(want, "\n"))
	}
	if cfg.PhaseTimeoutSec != 1800 {
		t.Fatalf("phase_timeout_sec %d: a misspelt variable set it", cfg.PhaseTimeoutSec)
	}
}
