package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"peal/config"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
	"peal/tickets"
)

func (h *harness) knowledge() string { return filepath.Join(h.stateDir, "knowledge") }

// ticket is the id of task i's ticket under the default ticket prefix.
func (h *harness) ticket(i int) string {
	return fmt.Sprintf("%s-%d", config.DefaultTicketPrefix(h.plan, h.repo), i)
}

func retryState(t *testing.T, h *harness, ticket string) tickets.RetryState {
	t.Helper()
	st, err := tickets.Load(h.knowledge(), ticket)
	if err != nil {
		t.Fatalf("retry state of %s: %v", ticket, err)
	}
	return st
}

func lastAttempt(t *testing.T, h *harness, ticket string) tickets.Attempt {
	t.Helper()
	st := retryState(t, h, ticket)
	if len(st.Attempts) == 0 {
		t.Fatalf("ticket %s has no attempt", ticket)
	}
	return st.Attempts[len(st.Attempts)-1]
}

func modelOf(c fakes.Call) string {
	if i := slices.Index(c.Argv, "--model"); i >= 0 {
		return c.Argv[i+1]
	}
	return ""
}

func TestTicketClosed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, twoTasks)
	if _, err := h.run(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{h.ticket(1), h.ticket(2)} {
		st := retryState(t, h, id)
		a := st.Attempts[0]
		if len(st.Attempts) != 1 || a.Status != "closed" || a.Trigger != "initial" || st.RetryCount != 0 || st.Status != "closed" || a.CompletedAt == "" {
			t.Fatalf("%s: %+v", id, st)
		}
		if a.QualityGate == nil || strings.Join(a.QualityGate.FailOn, ",") != "Critical,Major" || a.QualityGate.Counts != (tickets.Counts{}) {
			t.Fatalf("%s gate %+v", id, a.QualityGate)
		}
		summary, err := os.ReadFile(filepath.Join(h.knowledge(), "tickets", id, "close-summary.md"))
		if err != nil || !strings.Contains(string(summary), "**CLOSED**") {
			t.Fatalf("close-summary %q, %v", summary, err)
		}
	}
	for _, c := range h.calls() {
		if c.Env["PEAL_TICKET_ID"] != config.DefaultTicketPrefix(h.plan, h.repo)+"-"+c.Task {
			t.Fatalf("call %s saw PEAL_TICKET_ID=%q", c.Key, c.Env["PEAL_TICKET_ID"])
		}
	}
}

// TestEscalationLifecycle: blocked → the fixer model on attempt 2 → worker
// and second opinion on attempt 3 → skipped after max_retries.
func TestEscalationLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	h.scenario(map[string][]fakes.Outcome{"execute": plants(twoFindings()...)})
	env := append(h.withStet(fakes.StetScenario{}),
		"PEAL_MAX_ADDRESS_ROUNDS=1", "PEAL_MODEL=base", "PEAL_ESCALATION_ENABLED=true", "PEAL_ESCALATION_MAX_RETRIES=3",
		"PEAL_ESCALATION_FIXER=fixer-m", "PEAL_ESCALATION_REVIEWER_SECOND_OPINION=second-m", "PEAL_ESCALATION_WORKER=worker-m")
	wantModels := []map[string]string{
		{"plan": "base", "execute": "base", "triage": "base", "address": "base"},
		{"plan": "base", "execute": "base", "triage": "base", "address": "fixer-m"},
		{"plan": "worker-m", "execute": "worker-m", "triage": "second-m", "address": "fixer-m"},
	}
	wantTriggers := []string{"initial", "quality_gate", "quality_gate"}
	for i, want := range wantModels {
		before := len(h.calls())
		_, err := h.run(env...)
		if err == nil || !isFindingsRemaining(err) {
			t.Fatalf("run %d: err = %v", i+1, err)
		}
		for _, c := range h.calls()[before:] {
			if got := modelOf(c); got != want[c.Phase] {
				t.Errorf("run %d: %s call with model %q, want %q", i+1, c.Phase, got, want[c.Phase])
			}
		}
		st := retryState(t, h, h.ticket(1))
		a := st.Attempts[i]
		if len(st.Attempts) != i+1 || a.AttemptNumber != i+1 || a.Status != "blocked" || a.Trigger != wantTriggers[i] || st.RetryCount != i+1 {
			t.Fatalf("run %d: %+v", i+1, st)
		}
		if a.QualityGate.Counts != (tickets.Counts{Critical: 1, Major: 1}) {
			t.Fatalf("run %d counts %+v", i+1, a.QualityGate.Counts)
		}
		if i >= 1 && (a.Escalation == nil || a.Escalation.Fixer == nil || *a.Escalation.Fixer != "fixer-m") {
			t.Fatalf("run %d escalation %+v", i+1, a.Escalation)
		}
	}
	before := len(h.calls())
	out, err := h.run(env...)
	if err != nil || !slices.Equal(out.Skipped, []int{1}) || out.ExitCode != ExitWithIssues {
		t.Fatalf("fourth run: err %v, outcome %+v", err, out)
	}
	if len(h.calls()) != before || !strings.Contains(h.log.String(), "skipping ticket") {
		t.Fatal("a skipped ticket must run nothing and say why")
	}
	if sum, _ := h.summary(); !slices.Equal(sum.TasksSkipped, []int{1}) {
		t.Fatalf("summary %+v", sum)
	}
}

func TestEscalationOffNeverSkips(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	h.scenario(map[string][]fakes.Outcome{"execute": plants(twoFindings()...)})
	env := append(h.withStet(fakes.StetScenario{}), "PEAL_MAX_ADDRESS_ROUNDS=1", "PEAL_ESCALATION_MAX_RETRIES=1",
		"PEAL_ESCALATION_FIXER=fixer-m")
	for run := 1; run <= 3; run++ {
		if _, err := h.run(env...); !isFindingsRemaining(err) {
			t.Fatalf("run %d: err %v", run, err)
		}
	}
	if st := retryState(t, h, h.ticket(1)); len(st.Attempts) != 3 || st.RetryCount != 3 {
		t.Fatalf("%+v", st)
	}
	for _, c := range h.calls() {
		if modelOf(c) != "" {
			t.Fatalf("escalation off, yet %s got model %q", c.Key, modelOf(c))
		}
	}
}

func TestFindingsBelowTheGateClose(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	minor := []fakes.Finding{{ID: "N001", File: "a.go", Severity: "info", Message: "doc"}, {ID: "N002", File: "b.go", Severity: "nitpick", Message: "naming"}}
	h.scenario(map[string][]fakes.Outcome{"execute": plants(minor...)})
	env := append(h.withStet(fakes.StetScenario{}), "PEAL_MAX_ADDRESS_ROUNDS=1", "PEAL_ON_FINDINGS_REMAINING=warn")
	if _, err := h.run(env...); err != nil {
		t.Fatal(err)
	}
	a := lastAttempt(t, h, h.ticket(1))
	if a.Status != "closed" || a.QualityGate.Counts != (tickets.Counts{Minor: 1, Suggestions: 1}) {
		t.Fatalf("%+v", a)
	}
	// With Minor in fail_on the same findings block.
	h2 := newHarness(t, "## Task 1\nA\n")
	h2.scenario(map[string][]fakes.Outcome{"execute": plants(minor...)})
	env = append(h2.withStet(fakes.StetScenario{}), "PEAL_MAX_ADDRESS_ROUNDS=1", "PEAL_ON_FINDINGS_REMAINING=warn", "PEAL_FAIL_ON=Minor")
	if _, err := h2.run(env...); err != nil {
		t.Fatal(err)
	}
	if a := lastAttempt(t, h2, h2.ticket(1)); a.Status != "blocked" {
		t.Fatalf("%+v", a)
	}
}

func TestOtherFailuresAreErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	h.scenario(map[string][]fakes.Outcome{"execute": {fail}})
	h.run()
	st := retryState(t, h, h.ticket(1))
	if a := st.Attempts[0]; a.Status != "error" || st.RetryCount != 0 {
		t.Fatalf("%+v", st)
	}
	// The next attempt is a manual retry.
	h.scenario(nil)
	if _, err := h.run(); err != nil {
		t.Fatal(err)
	}
	if a := lastAttempt(t, h, h.ticket(1)); a.AttemptNumber != 2 || a.Trigger != "manual_retry" || a.Status != "closed" {
		t.Fatalf("%+v", a)
	}
}

func TestInterruptedAttemptIsResumed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	// A crash in the middle of an attempt leaves it in progress.
	store := tickets.NewStore(h.knowledge())
	defer store.Close()
	tk, err := store.Open(h.ticket(1), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tk.Begin(time.Now(), nil)
	tk.Close()
	if _, err := h.run(); err != nil {
		t.Fatal(err)
	}
	st := retryState(t, h, h.ticket(1))
	if len(st.Attempts) != 1 || st.Attempts[0].Status != "closed" {
		t.Fatalf("the in-progress attempt was not resumed: %+v", st)
	}
}

func TestRetryReset(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	h.scenario(map[string][]fakes.Outcome{"execute": {fail}})
	h.run()
	h.scenario(nil)
	cfg := h.config()
	cfg.RetryReset = true
	if _, err := h.runCfg(cfg); err != nil {
		t.Fatal(err)
	}
	backups, _ := filepath.Glob(filepath.Join(h.knowledge(), "tickets", h.ticket(1), "retry-state.json.bak.*"))
	if len(backups) != 1 {
		t.Fatalf("backups %v", backups)
	}
	if st := retryState(t, h, h.ticket(1)); len(st.Attempts) != 1 || st.Attempts[0].Trigger != "initial" {
		t.Fatalf("not a fresh attempt 1: %+v", st)
	}
}

func TestTicketMode(t *testing.T) {
	t.Parallel()
	h := newHarness(t, twoTasks)
	if _, err := h.run("PEAL_TICKET_ID=pt-te9b"); err != nil {
		t.Fatal(err)
	}
	st := retryState(t, h, "pt-te9b")
	if len(st.Attempts) != 1 || st.Attempts[0].Status != "closed" {
		t.Fatalf("%+v", st)
	}
	if _, err := os.Stat(filepath.Join(h.knowledge(), "tickets", h.ticket(1))); err == nil {
		t.Fatal("ticket mode must not create per-task tickets")
	}
	for _, c := range h.calls() {
		if c.Env["PEAL_TICKET_ID"] != "pt-te9b" {
			t.Fatalf("%s saw PEAL_TICKET_ID=%q", c.Key, c.Env["PEAL_TICKET_ID"])
		}
	}
}

func TestTicketHeldByAnotherProcess(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	store := tickets.NewStore(h.knowledge())
	defer store.Close()
	held, err := store.Open(h.ticket(1), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	_, err = h.run("PEAL_CONTINUE_WITH_REMAINING_TASKS=true")
	if err == nil || !strings.Contains(err.Error(), h.ticket(1)) || !strings.Contains(err.Error(), "another peal process") {
		t.Fatalf("err = %v", err)
	}
	if len(h.calls()) != 0 {
		t.Fatalf("agent called: %s", h.keys())
	}
}

func TestCorruptRetryStateKeptAside(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	dir := filepath.Join(h.knowledge(), "tickets", h.ticket(1))
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "retry-state.json"), []byte("{oops"), 0o644)
	if _, err := h.run(); err != nil {
		t.Fatal(err)
	}
	aside, _ := filepath.Glob(filepath.Join(dir, "retry-state.json.corrupt-*"))
	if len(aside) != 1 || len(retryState(t, h, h.ticket(1)).Attempts) != 1 {
		t.Fatalf("kept aside %v", aside)
	}
}

// TestTFSettingsShareTheStore: in a ticketflow project the store is the
// project's, and its settings.json escalation applies.
func TestTFSettingsShareTheStore(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	settings := filepath.Join(h.repo, ".tf", "config", "settings.json")
	os.MkdirAll(filepath.Dir(settings), 0o755)
	os.WriteFile(settings, []byte(`{"workflow": {"escalation": {"enabled": true, "maxRetries": 1, "models": {"fixer": "tf-fixer"}}}}`), 0o644)
	// A ticketflow project keeps its settings in the repository; the store
	// that peal writes in .tf/knowledge stays out of the commits.
	testgit.Git(t, h.repo, "add", ".tf")
	testgit.Git(t, h.repo, "commit", "-q", "-m", "tf settings")
	h.scenario(map[string][]fakes.Outcome{"execute": plants(twoFindings()...)})
	env := append(h.withStet(fakes.StetScenario{}), "PEAL_MAX_ADDRESS_ROUNDS=1")
	for run := 1; run <= 2; run++ {
		out, err := h.run(env...)
		if run == 1 && !isFindingsRemaining(err) || run == 2 && (err != nil || !slices.Equal(out.Skipped, []int{1})) {
			t.Fatalf("run %d: err %v, outcome %+v", run, err, out)
		}
	}
	if files := testgit.Git(t, h.repo, "log", "--name-only", "--format="); strings.Contains(files, ".tf/knowledge") {
		t.Fatalf("the retry-state store was committed:\n%s", files)
	}
	st, err := tickets.Load(filepath.Join(h.repo, ".tf", "knowledge"), h.ticket(1))
	if err != nil || st.RetryCount != 1 {
		t.Fatalf("the project's store was not used: %+v %v", st, err)
	}
}

// TestRetryStateFileShape checks a written file against the schema of
// retry-state-spec.md: required members, types and enum values.
func TestRetryStateFileShape(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	h.scenario(map[string][]fakes.Outcome{"execute": plants(twoFindings()...)})
	env := append(h.withStet(fakes.StetScenario{}), "PEAL_MAX_ADDRESS_ROUNDS=1", "PEAL_ESCALATION_ENABLED=true")
	h.run(env...)
	data, err := os.ReadFile(filepath.Join(h.knowledge(), "tickets", h.ticket(1), "retry-state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"version", "ticketId", "attempts", "lastAttemptAt", "status", "retryCount"} {
		if _, ok := doc[key]; !ok {
			t.Fatalf("missing %s in %s", key, data)
		}
	}
	stamp := func(v any) bool {
		s, ok := v.(string)
		_, err := time.Parse("2006-01-02T15:04:05Z", s)
		return ok && err == nil
	}
	if doc["version"] != 1.0 || doc["ticketId"] != h.ticket(1) || !stamp(doc["lastAttemptAt"]) || !slices.Contains([]any{"active", "blocked", "closed"}, doc["status"]) {
		t.Fatalf("top level %s", data)
	}
	a := doc["attempts"].([]any)[0].(map[string]any)
	if a["attemptNumber"] != 1.0 || !stamp(a["startedAt"]) || !stamp(a["completedAt"]) || a["status"] != "blocked" || a["trigger"] != "initial" || a["closeSummaryRef"] != "close-summary.md" {
		t.Fatalf("attempt %v", a)
	}
	counts := a["qualityGate"].(map[string]any)["counts"].(map[string]any)
	for _, sev := range []string{"Critical", "Major", "Minor", "Warnings", "Suggestions"} {
		if _, ok := counts[sev].(float64); !ok {
			t.Fatalf("counts %v", counts)
		}
	}
	esc := a["escalation"].(map[string]any)
	for _, role := range []string{"fixer", "reviewerSecondOpinion", "worker"} {
		if v, ok := esc[role]; !ok || v != nil {
			t.Fatalf("escalation %v: every role must be present and null on attempt 1", esc)
		}
	}
}
