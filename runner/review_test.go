package runner

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"peal/internal/fakes"
)

// stetDir sets up the fake stet for the harness and returns the variables
// that point peal at it.
func (h *harness) withStet(s fakes.StetScenario) []string {
	h.t.Helper()
	dir := filepath.Join(h.tmp, "stet")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := fakes.WriteStetScenario(dir, s); err != nil {
		h.t.Fatal(err)
	}
	h.env = append(h.env, fakes.StetDirEnv+"="+dir)
	h.stetDir = dir
	return []string{"PEAL_STET_PATH=" + fakeStet}
}

func (h *harness) stetCmds() string {
	h.t.Helper()
	c, err := fakes.ReadStetCalls(h.stetDir)
	if err != nil {
		h.t.Fatal(err)
	}
	return strings.Join(fakes.StetCmds(c), "; ")
}

func twoFindings() []fakes.Finding {
	return []fakes.Finding{
		{ID: "F1", File: "a.go", Line: 3, Severity: "warning", Category: "style", Confidence: 0.9, Message: "unused variable"},
		{ID: "F2", File: "vendor/b.go", Line: 9, Severity: "error", Category: "bug", Confidence: 0.8, Message: "nil dereference", Suggestion: "check for nil first"},
	}
}

const (
	startCmd  = "start"
	runJSON   = "run --output=json"
	finishCmd = "finish"
)

func seq(cmds ...string) string { return strings.Join(cmds, "; ") }

// TestPhase3Sequences asserts the exact agent calls and stet commands of the
// address loop's main paths.
func TestPhase3Sequences(t *testing.T) {
	t.Parallel()
	noFix := fakes.Outcome{}
	fixAll := fakes.Outcome{StetFix: -1}
	fixOne := fakes.Outcome{StetFix: 1}
	three := append(twoFindings(), fakes.Finding{ID: "F3", File: "c.go", Severity: "info", Message: "doc"})
	cases := []struct {
		name      string
		findings  []fakes.Finding
		output    string
		rules     map[string][]fakes.Outcome
		env       []string
		wantAgent string
		wantStet  string
		wantErr   string
		wantLeft  bool
	}{
		{"no findings", nil, "", nil, nil,
			"plan:1 execute:1", seq(startCmd, runJSON, finishCmd), "", false},
		{"fixed in round 1", twoFindings(), "", map[string][]fakes.Outcome{"address": {fixAll}}, nil,
			"plan:1 execute:1 triage:1 address:1", seq(startCmd, runJSON, runJSON, finishCmd), "", false},
		{"fixed in round 2", twoFindings(), "", map[string][]fakes.Outcome{"address": {noFix, fixAll}}, nil,
			"plan:1 execute:1 triage:1 address:1 triage:1 address:1", seq(startCmd, runJSON, runJSON, runJSON, finishCmd), "", false},
		{"fixed one per round", three, "", map[string][]fakes.Outcome{"address": {fixOne}}, []string{"PEAL_MAX_ADDRESS_ROUNDS=3"},
			"plan:1 execute:1 triage:1 address:1 triage:1 address:1 triage:1 address:1", seq(startCmd, runJSON, runJSON, runJSON, runJSON, finishCmd), "", false},
		{"never fixed, fail", twoFindings(), "", nil, []string{"PEAL_MAX_ADDRESS_ROUNDS=2"},
			"plan:1 execute:1 triage:1 address:1 triage:1 address:1", seq(startCmd, runJSON, runJSON, runJSON, finishCmd), "2 finding(s) remain after 2 address round(s)", false},
		{"never fixed, warn", twoFindings(), "", nil, []string{"PEAL_MAX_ADDRESS_ROUNDS=1", "PEAL_ON_FINDINGS_REMAINING=warn"},
			"plan:1 execute:1 triage:1 address:1", seq(startCmd, runJSON, runJSON, finishCmd), "", true},
		{"zero rounds", twoFindings(), "", nil, []string{"PEAL_MAX_ADDRESS_ROUNDS=0"},
			"plan:1 execute:1", seq(startCmd, runJSON, finishCmd), "remain after 0 address round(s)", false},
		{"triage: nothing to address", twoFindings(), "", map[string][]fakes.Outcome{"triage": {{Stdout: "Looked at both. Nothing to address here."}}}, nil,
			"plan:1 execute:1 triage:1", seq(startCmd, runJSON, "dismiss F1 false_positive", "dismiss F2 false_positive", runJSON, finishCmd), "", false},
		{"triage: bare no", twoFindings(), "", map[string][]fakes.Outcome{"triage": {{Stdout: "No."}}}, nil,
			"plan:1 execute:1 triage:1", seq(startCmd, runJSON, "dismiss F1 false_positive", "dismiss F2 false_positive", runJSON, finishCmd), "", false},
		{"triage: fix one, dismiss the other", twoFindings(), "", map[string][]fakes.Outcome{"triage": {{Stdout: "F1 is noise. We need to fix F2 though."}}, "address": {fixAll}}, nil,
			"plan:1 execute:1 triage:1 address:1", seq(startCmd, runJSON, "dismiss F1 false_positive", runJSON, runJSON, finishCmd), "", false},
		{"patterns instead of LLM triage", twoFindings(), "", map[string][]fakes.Outcome{"address": {fixAll}},
			[]string{"PEAL_STET_DISABLE_LLM_TRIAGE=true", "PEAL_STET_DISMISS_PATTERNS=vendor/|out_of_scope"},
			"plan:1 execute:1 address:1", seq(startCmd, runJSON, "dismiss F2 out_of_scope", runJSON, runJSON, finishCmd), "", false},
		{"human output without findings", nil, fakes.OutputHuman, nil, nil,
			"plan:1 execute:1", seq(startCmd, runJSON, finishCmd), "", false},
		{"non-JSON output with findings", twoFindings(), fakes.OutputText, map[string][]fakes.Outcome{"address": {fixAll}}, nil,
			"plan:1 execute:1 address:1", seq(startCmd, runJSON, runJSON, finishCmd), "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "## Task 1\nA\n")
			env := append(h.withStet(fakes.StetScenario{Findings: tc.findings, Output: tc.output, RunExitOnFindings: 1}), tc.env...)
			h.scenario(tc.rules)
			out, err := h.run(env...)
			if h.keys() != tc.wantAgent {
				t.Errorf("agent calls %q\nwant        %q", h.keys(), tc.wantAgent)
			}
			if h.stetCmds() != tc.wantStet {
				t.Errorf("stet calls %q\nwant       %q", h.stetCmds(), tc.wantStet)
			}
			if tc.output == fakes.OutputText && !strings.Contains(h.log.String(), "structured dismiss step is skipped") {
				t.Error("no warning that the structured dismiss step was skipped")
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if _, statErr := os.Stat(filepath.Join(h.stateDir, "state.json")); statErr != nil || len(h.state().CompletedTaskIndices) != 0 {
					t.Fatal("a task whose Phase 3 failed must be saved as not completed")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantLeft != (len(out.WithFindings) == 1) || !slices.Equal(h.state().CompletedTaskIndices, []int{1}) {
				t.Fatalf("outcome %+v, state %+v", out, h.state())
			}
			if tc.wantLeft && out.ExitCode != ExitWithIssues {
				t.Fatalf("exit %d with findings left", out.ExitCode)
			}
		})
	}
}

func TestFindingsRemainingError(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	git(t, h.repo, "commit", "-q", "--allow-empty", "-m", "root")
	head := strings.TrimSpace(git(t, h.repo, "rev-parse", "HEAD"))
	env := h.withStet(fakes.StetScenario{Findings: twoFindings()})
	_, err := h.run(append(env, "PEAL_MAX_ADDRESS_ROUNDS=1")...)
	var fe *FindingsRemainingError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v", err)
	}
	if fe.Task != 1 || fe.Rounds != 1 || fe.Remaining != 2 || fe.Head != head || !strings.Contains(fe.Output, "nil dereference") {
		t.Fatalf("error %+v", fe)
	}
	if !strings.Contains(err.Error(), "task 1:") || !strings.Contains(err.Error(), head) {
		t.Fatalf("message %q", err)
	}
}

// TestPhase3RetryRows: address gets 1 + min(phase_3_retry_count, 2) attempts;
// phase_retry_count never changes Phase 3.
func TestPhase3RetryRows(t *testing.T) {
	t.Parallel()
	fail := fakes.Outcome{Exit: 1, Stderr: "address broke"}
	cases := []struct {
		name      string
		env       []string
		address   []fakes.Outcome
		wantCalls int
		wantErr   bool
	}{
		{"default: one attempt", nil, []fakes.Outcome{fail, {StetFix: -1}}, 1, true},
		{"one retry", []string{"PEAL_PHASE_3_RETRY_COUNT=1"}, []fakes.Outcome{fail, {StetFix: -1}}, 2, false},
		{"capped at two retries", []string{"PEAL_PHASE_3_RETRY_COUNT=5"}, []fakes.Outcome{fail}, 3, true},
		{"capped from the flag layer too", []string{"PEAL_PHASE_3_RETRY_COUNT=4294967295"}, []fakes.Outcome{fail}, 3, true},
		{"phase_retry_count leaves Phase 3 alone", []string{"PEAL_PHASE_RETRY_COUNT=3"}, []fakes.Outcome{fail}, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "## Task 1\nA\n")
			env := h.withStet(fakes.StetScenario{Findings: twoFindings()})
			h.scenario(map[string][]fakes.Outcome{"address": tc.address})
			_, err := h.run(append(env, tc.env...)...)
			if n := strings.Count(h.keys(), "address:1"); n != tc.wantCalls {
				t.Fatalf("address attempts %d, want %d (%s)", n, tc.wantCalls, h.keys())
			}
			if tc.wantErr != (err != nil) {
				t.Fatalf("err = %v", err)
			}
			if err != nil && !strings.Contains(err.Error(), "address broke") {
				t.Fatalf("err %q lacks the agent's message", err)
			}
		})
	}
}

// TestTriageFallback: triage gets the same attempts; afterwards neither a
// timeout nor a non-zero exit fails the task, and nothing is dismissed.
func TestTriageFallback(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		env    []string
		triage fakes.Outcome
		want   string
	}{
		{"non-zero exit, no retries", nil, fakes.Outcome{Exit: 2}, "triage:1 address:1"},
		{"non-zero exit, capped retries", []string{"PEAL_PHASE_3_RETRY_COUNT=9"}, fakes.Outcome{Exit: 2}, "triage:1 triage:1 triage:1 address:1"},
		{"timeout, one retry", []string{"PEAL_PHASE_3_RETRY_COUNT=1", "PEAL_PHASE_TIMEOUT_SEC=1"}, fakes.Outcome{Hang: true, Stdout: "Nothing to address"}, "triage:1 triage:1 address:1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "## Task 1\nA\n")
			env := h.withStet(fakes.StetScenario{Findings: twoFindings()})
			h.scenario(map[string][]fakes.Outcome{"triage": {tc.triage}, "address": {{StetFix: -1}}})
			if _, err := h.run(append(env, tc.env...)...); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimPrefix(h.keys(), "plan:1 execute:1 "); got != tc.want {
				t.Fatalf("calls %q, want %q", got, tc.want)
			}
			if strings.Contains(h.stetCmds(), "dismiss") {
				t.Fatalf("something was dismissed: %s", h.stetCmds())
			}
		})
	}
}

func TestOnStetFail(t *testing.T) {
	t.Parallel()
	bad := fakes.Outcome{Exit: 1, Stderr: "stet is unhappy"}
	hang := fakes.Outcome{Hang: true}
	cases := []struct {
		name      string
		mode      string
		stetRules map[string][]fakes.Outcome
		agent     map[string][]fakes.Outcome
		wantAgent string
		wantStet  string
		wantErr   string
		wantLeft  bool
	}{
		{"start fails: fail", "fail", map[string][]fakes.Outcome{"start": {bad}}, nil, "", seq(startCmd), "stet start", false},
		{"start fails: retry_once", "retry_once", map[string][]fakes.Outcome{"start": {bad}}, nil, "", seq(startCmd, startCmd), "stet start", false},
		{"start fails once: retry_once", "retry_once", map[string][]fakes.Outcome{"start": {bad, {}}}, map[string][]fakes.Outcome{"address": {{StetFix: -1}}},
			"plan:1 execute:1 triage:1 address:1", seq(startCmd, startCmd, runJSON, runJSON, finishCmd), "", false},
		{"start fails: skip", "skip", map[string][]fakes.Outcome{"start": {bad}}, nil, "plan:1 execute:1", seq(startCmd), "", false},
		{"review times out: fail", "fail", map[string][]fakes.Outcome{"run": {hang}}, nil, "plan:1 execute:1", seq(startCmd, runJSON, finishCmd), "timed out", false},
		{"review times out: retry_once", "retry_once", map[string][]fakes.Outcome{"run": {hang}}, nil, "plan:1 execute:1", seq(startCmd, runJSON, runJSON, finishCmd), "timed out", false},
		{"review times out: skip", "skip", map[string][]fakes.Outcome{"run": {hang}}, nil, "plan:1 execute:1", seq(startCmd, runJSON, finishCmd), "", false},
		{"address loop fails: retry_once reruns it", "retry_once", nil, map[string][]fakes.Outcome{"address": {{Exit: 1}}},
			"plan:1 execute:1 triage:1 address:1 triage:1 address:1", seq(startCmd, runJSON, finishCmd), "address failed", false},
		{"address loop fails: skip", "skip", nil, map[string][]fakes.Outcome{"address": {{Exit: 1}}},
			"plan:1 execute:1 triage:1 address:1", seq(startCmd, runJSON, finishCmd), "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "## Task 1\nA\n")
			env := h.withStet(fakes.StetScenario{Findings: twoFindings(), Rules: tc.stetRules})
			h.scenario(tc.agent)
			out, err := h.run(append(env, "PEAL_ON_STET_FAIL="+tc.mode, "PEAL_PHASE_TIMEOUT_SEC=2")...)
			if h.keys() != tc.wantAgent || h.stetCmds() != tc.wantStet {
				t.Fatalf("agent %q (want %q), stet %q (want %q)", h.keys(), tc.wantAgent, h.stetCmds(), tc.wantStet)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantLeft != slices.Equal(out.WithFindings, []int{1}) {
				t.Fatalf("outcome %+v", out)
			}
		})
	}
}

func TestCustomStetCommands(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n## Task 2\nB\n")
	h.withStet(fakes.StetScenario{Findings: twoFindings()})
	h.scenario(map[string][]fakes.Outcome{"address:1": {{StetFix: -1}}})
	cmds := "PEAL_STET_COMMANDS=" + fakeStet + " start HEAD, " + fakeStet + " run --output=json --strict"
	if _, err := h.run(cmds); err != nil {
		t.Fatal(err)
	}
	custom := "run --output=json --strict"
	// Session start runs every command once; each review runs the last one;
	// no triage, no dismiss, no finish.
	if want := seq("start HEAD", custom, custom, custom, custom); h.stetCmds() != want {
		t.Fatalf("stet %q, want %q", h.stetCmds(), want)
	}
	if h.keys() != "plan:1 execute:1 address:1 plan:2 execute:2" {
		t.Fatalf("agent %q", h.keys())
	}
}

func TestStetResolution(t *testing.T) {
	// Not parallel: one case changes PATH for the whole process.
	t.Run("stet_path not executable: no Phase 3", func(t *testing.T) {
		h := newHarness(t, "## Task 1\nA\n")
		h.withStet(fakes.StetScenario{Findings: twoFindings()})
		notExec := filepath.Join(h.tmp, "stet-not-exec")
		os.WriteFile(notExec, []byte("x"), 0o644)
		if _, err := h.run("PEAL_STET_PATH=" + notExec); err != nil {
			t.Fatal(err)
		}
		if h.stetCmds() != "" || h.keys() != "plan:1 execute:1" || !strings.Contains(h.log.String(), "stet_path is not an executable file") {
			t.Fatalf("stet %q, agent %q", h.stetCmds(), h.keys())
		}
	})
	t.Run("stet found on PATH", func(t *testing.T) {
		h := newHarness(t, "## Task 1\nA\n")
		h.withStet(fakes.StetScenario{})
		bin := filepath.Join(h.tmp, "bin")
		os.MkdirAll(bin, 0o755)
		if err := os.Symlink(fakeStet, filepath.Join(bin, "stet")); err != nil {
			t.Fatal(err)
		}
		t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		if _, err := h.run(); err != nil {
			t.Fatal(err)
		}
		if h.stetCmds() != seq(startCmd, runJSON, finishCmd) {
			t.Fatalf("stet %q", h.stetCmds())
		}
	})
}

func TestAddressPromptCarriesReviewAndSuggestions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	env := h.withStet(fakes.StetScenario{Findings: twoFindings(), RunExitOnFindings: 1})
	h.scenario(map[string][]fakes.Outcome{"address": {{StetFix: -1}}})
	if _, err := h.run(append(env, "PEAL_STET_START_REF=main", "PEAL_STET_START_EXTRA_ARGS=--allow-dirty", "PEAL_STET_RUN_EXTRA_ARGS=--context 8k")...); err != nil {
		t.Fatal(err)
	}
	c := h.calls()
	triage, address := c[2], c[3]
	tp, ap := triage.Argv[len(triage.Argv)-1], address.Argv[len(address.Argv)-1]
	if !strings.Contains(tp, "---STET---\n{") || !strings.HasSuffix(tp, "Anything to address from this review?") {
		t.Errorf("triage prompt %q", tp)
	}
	if !strings.Contains(ap, "---STET---\n{") || !strings.Contains(ap, "---SUGGESTIONS---\ncheck for nil first\n---SUGGESTIONS---") {
		t.Errorf("address prompt %q", ap)
	}
	for _, call := range []fakes.Call{triage, address} {
		if !slices.Contains(call.Argv, "--sandbox") || slices.Contains(call.Argv, "--plan") {
			t.Errorf("%s argv %q", call.Phase, call.Argv)
		}
	}
	if want := seq("start main --allow-dirty", "run --output=json --context 8k", "run --output=json --context 8k", finishCmd); h.stetCmds() != want {
		t.Fatalf("stet %q, want %q", h.stetCmds(), want)
	}
}

// TestPhase3FailureKeepsEarlierTasks: state is saved before the error of a
// later task's Phase 3, and stet finish still runs.
func TestPhase3FailureKeepsEarlierTasks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n## Task 2\nB\n## Task 3\nC\n")
	env := h.withStet(fakes.StetScenario{})
	h.scenario(map[string][]fakes.Outcome{"execute:2": {{WriteFiles: map[string]string{"x": "y"}}}})
	// The review of task 2 times out.
	fakes.WriteStetScenario(h.stetDir, fakes.StetScenario{Rules: map[string][]fakes.Outcome{"run": {{}, {Hang: true}}}})
	_, err := h.run(append(env, "PEAL_PHASE_TIMEOUT_SEC=1")...)
	if err == nil || !strings.Contains(err.Error(), "task 2") {
		t.Fatalf("err = %v", err)
	}
	if !slices.Equal(h.state().CompletedTaskIndices, []int{1}) {
		t.Fatalf("state %+v", h.state())
	}
	if !strings.HasSuffix(h.stetCmds(), finishCmd) {
		t.Fatalf("stet finish did not run after the failure: %q", h.stetCmds())
	}
}

// TestInterruptedRunFinishesStet: a signal mid-run still closes the review
// session (best effort) after stopping the agent.
func TestInterruptedRunFinishesStet(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	env := h.withStet(fakes.StetScenario{})
	ready := readyPipe(t)
	h.scenario(map[string][]fakes.Outcome{"execute": {{WriteFiles: map[string]string{ready: "x"}, Hang: true}}})
	cfg := h.config(env...)
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, cfg, slog.New(slog.DiscardHandler), h.opts()...)
		done <- err
	}()
	waitReady(t, ready)
	cancel(errors.New("SIGINT"))
	if err := <-done; !IsInterrupted(err) {
		t.Fatalf("err = %v", err)
	}
	if h.stetCmds() != seq(startCmd, finishCmd) {
		t.Fatalf("stet calls %q", h.stetCmds())
	}
}
