package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRetryStateCommands(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nA\n")
	if r := s.peal(s.env(), "run"); r.code != 0 {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	store := filepath.Join(s.stateDir, "knowledge")
	env := s.env("PEAL_KNOWLEDGE_DIR="+store, "PEAL_ESCALATION_ENABLED=true", "PEAL_ESCALATION_FIXER=fix-m")

	r := s.peal(env, "retry-state", "show", s.ticket(1))
	if r.code != 0 || !strings.Contains(r.stdout, "status closed, retryCount 0") || !strings.Contains(r.stdout, "initial  closed") ||
		!strings.Contains(r.stdout, "next attempt 2: fix-m, base, base") {
		t.Fatalf("show: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = s.peal(env, "retry-state", "show", s.ticket(1), "--json")
	var doc map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || doc["ticketId"] != s.ticket(1) {
		t.Fatalf("show --json: %d %s", r.code, r.stdout)
	}
	r = s.peal(env, "retry-state", "show", "plan-9")
	if r.code != 1 || !strings.Contains(r.stderr, "plan-9") {
		t.Fatalf("unknown ticket: %d %s", r.code, r.stderr)
	}
	r = s.peal(s.env(), "retry-state", "reset", s.ticket(1), "--knowledge-dir", store)
	backup := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.Contains(backup, "retry-state.json.bak.") {
		t.Fatalf("reset: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(backup); err != nil {
		t.Fatal("the backup does not exist")
	}
	if r := s.peal(env, "retry-state", "show", s.ticket(1)); r.code != 1 {
		t.Fatal("after a reset the ticket has no retry state")
	}
}

// A file ticketflow accepts but that is odd (another ticket's id) is shown,
// with a warning saying what is odd.
func TestRetryStateShowWarns(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nA\n")
	store := filepath.Join(s.stateDir, "knowledge")
	dir := filepath.Join(store, "tickets", "pt-abcd")
	os.MkdirAll(dir, 0o755)
	doc := `{"version": 1, "ticketId": "pt-other", "attempts": [], "lastAttemptAt": null, "status": "active", "retryCount": 0}`
	os.WriteFile(filepath.Join(dir, "retry-state.json"), []byte(doc), 0o644)
	r := s.peal(s.env("PEAL_KNOWLEDGE_DIR="+store), "retry-state", "show", "pt-abcd")
	if r.code != 0 || !strings.Contains(r.stderr, "peal: warning: ticket pt-abcd: it names ticket") {
		t.Fatalf("show: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestRetryStateDetect(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	blocked := filepath.Join(dir, "blocked")
	review := filepath.Join(dir, "review")
	os.MkdirAll(blocked, 0o755)
	os.MkdirAll(review, 0o755)
	os.WriteFile(filepath.Join(blocked, "close-summary.md"), []byte("## Status\n**BLOCKED**\n\n## Summary Statistics\n- **Critical**: 2\n- Major: 1\n"), 0o644)
	os.WriteFile(filepath.Join(review, "review.md"), []byte("# Review\n\n## Critical (must fix)\n- the build breaks\n\n## Minor\n- typo\n"), 0o644)
	s := newSandbox(t, "## Task 1\nA\n")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{blocked, "--json"}, `{"blocked":true,"source":"close-summary.md","counts":{"Critical":2,"Major":1,"Minor":0,"Warnings":0,"Suggestions":0},"close_status":"blocked"}`},
		{[]string{review, "--json"}, `{"blocked":true,"source":"review.md","counts":{"Critical":1},"close_status":"unknown"}`},
		{[]string{review, "--json", "--fail-on", ""}, `{"blocked":false,"source":"","counts":{},"close_status":"unknown"}`},
		{[]string{review, "--json", "--fail-on", "minor"}, `{"blocked":true,"source":"review.md","counts":{"Minor":1},"close_status":"unknown"}`},
	}
	for _, tc := range cases {
		r := s.peal(nil, append([]string{"retry-state", "detect"}, tc.args...)...)
		if r.code != 0 || strings.TrimSpace(r.stdout) != tc.want {
			t.Errorf("detect %v: %d\n got %s\nwant %s\n%s", tc.args, r.code, strings.TrimSpace(r.stdout), tc.want, r.stderr)
		}
	}
	if r := s.peal(nil, "retry-state", "detect", review, "--fail-on", "Blocker"); r.code != 1 || !strings.Contains(r.stderr, "Blocker") {
		t.Fatalf("bad --fail-on: %d %s", r.code, r.stderr)
	}
}

// TestConfigProvenance: `peal config --json` names the layer of every key.
func TestConfigProvenance(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nA\n")
	settings := filepath.Join(s.repo, ".tf", "config", "settings.json")
	os.MkdirAll(filepath.Dir(settings), 0o755)
	os.WriteFile(settings, []byte(`{"workflow": {"escalation": {"maxRetries": 7}}}`), 0o644)
	os.WriteFile(filepath.Join(s.dir, "peal.toml"), []byte("max_address_rounds = 9\nstet_dismiss_patterns = [{pattern = \"x\", reason = \"out_of_scope\"}]\n"), 0o644)
	r := s.peal(s.env("PEAL_PHASE_RETRY_COUNT=4"), "config", "--config", "peal.toml", "--model", "m1", "--json")
	if r.code != 0 {
		t.Fatalf("%d %s", r.code, r.stderr)
	}
	var doc map[string]struct {
		Value  any    `json:"value"`
		Source string `json:"source"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		value  any
		source string
	}{
		"model":                  {"m1", "flag"},
		"phase_retry_count":      {4.0, "env"},
		"max_address_rounds":     {9.0, "file"},
		"escalation.max_retries": {7.0, "tf-settings"},
		"phase_timeout_sec":      {30.0, "env"},
		"sandbox":                {"disabled", "default"},
		"stet_path":              {nil, "default"},
	}
	for key, w := range want {
		got := doc[key]
		if got.Value != w.value || got.Source != w.source {
			t.Errorf("%s = %v from %s, want %v from %s", key, got.Value, got.Source, w.value, w.source)
		}
	}
	if p, _ := doc["stet_dismiss_patterns"].Value.([]any); len(p) != 1 {
		t.Errorf("stet_dismiss_patterns %v", doc["stet_dismiss_patterns"])
	}
	r = s.peal(s.env(), "config")
	if r.code != 0 || !strings.Contains(r.stdout, `model`) || !strings.Contains(r.stdout, "(default)") {
		t.Fatalf("table: %d %s", r.code, r.stdout)
	}
	// Configuration errors exit 1 exactly as `peal run` would.
	bad := s.env("PEAL_MAX_PARALLEL=lots")
	rc, rr := s.peal(bad, "config"), s.peal(bad, "run")
	if rc.code != 1 || rc.stderr != rr.stderr {
		t.Fatalf("config: %d %q; run: %d %q", rc.code, rc.stderr, rr.code, rr.stderr)
	}
}
