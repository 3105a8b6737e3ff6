package runner

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"peal/agent"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
	"peal/phase"
	"peal/review"
	"peal/state"
)

// withStet sets up the fake stet for the harness: the repository gets a
// first commit to review against, and the returned variables point peal at
// the fake.
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
	// The fake stet records its calls there, also when it runs confined
	// (stet_commands).
	h.writable = append(h.writable, dir)
	if !hasCommit(h.t, h.repo) {
		testgit.Git(h.t, h.repo, "commit", "-q", "--allow-empty", "-m", "root")
	}
	return []string{"PEAL_STET_PATH=" + fakeStet}
}

// hasCommit reports whether the branch HEAD names in repo has a commit:
// whether its ref file exists (a test's fresh repository packs no refs).
func hasCommit(t *testing.T, repo string) bool {
	t.Helper()
	head, err := os.ReadFile(filepath.Join(repo, ".git", "HEAD"))
	if err != nil {
		t.Fatal(err)
	}
	ref, ok := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: ")
	if !ok {
		return true // detached: HEAD is a commit
	}
	_, err = os.Stat(filepath.Join(repo, ".git", filepath.FromSlash(ref)))
	return err == nil
}

// stetCmds are the fake stet's calls, "; "-separated ("SHA" for a commit).
func (h *harness) stetCmds() string {
	h.t.Helper()
	c, err := fakes.ReadStetCalls(h.stetDir)
	if err != nil {
		h.t.Fatal(err)
	}
	return strings.Join(fakes.StetCmds(c), "; ")
}

// stetCalls are the fake stet's start records.
func (h *harness) stetCalls() []fakes.StetCall {
	h.t.Helper()
	c, err := fakes.ReadStetCalls(h.stetDir)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []fakes.StetCall
	for _, call := range c {
		if call.Event == fakes.EventStart {
			out = append(out, call)
		}
	}
	return out
}

// commits are the subjects of the repository's commits, oldest first.
func (h *harness) commits() []string {
	h.t.Helper()
	out := testgit.Git(h.t, h.repo, "log", "--reverse", "--format=%s")
	return strings.Split(out, "\n")
}

func twoFindings() []fakes.Finding {
	return []fakes.Finding{
		{ID: "F001", File: "a.go", Severity: "warning", Category: "style", Confidence: 0.9, Message: "unused variable"},
		{ID: "F002", File: "vendor/b.go", Severity: "error", Category: "bug", Confidence: 0.8, Message: "nil dereference", Suggestion: "check for nil first"},
	}
}

// plants is an execute that writes findings into the code.
func plants(fs ...fakes.Finding) []fakes.Outcome { return []fakes.Outcome{{Plant: fs}} }

// withRules adds rules to a scenario.
func withRules(base map[string][]fakes.Outcome, more map[string][]fakes.Outcome) map[string][]fakes.Outcome {
	out := map[string][]fakes.Outcome{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range more {
		out[k] = v
	}
	return out
}

// The fake stet's commands as stetCmds renders them.
const (
	statusCmd = "status"
	startCmd  = "start SHA"
	finishCmd = "finish"
	reviewCmd = "run --output=json --stream; run --output=json"
)

func seq(cmds ...string) string { return strings.Join(cmds, "; ") }

// TestPhase3Sequences asserts the exact agent calls and stet commands of the
// address loop's main paths, with the work committed before each review.
func TestPhase3Sequences(t *testing.T) {
	t.Parallel()
	noFix := fakes.Outcome{}
	fixAll := fakes.Outcome{StetFix: -1}
	fixOne := fakes.Outcome{StetFix: 1}
	three := append(twoFindings(), fakes.Finding{ID: "F003", File: "c.go", Severity: "info", Message: "doc"})
	sameHunk := []fakes.Finding{{ID: "F001", File: "a.go", Severity: "error", Message: "nil dereference"}, {ID: "F002", File: "a.go", Severity: "nitpick", Message: "naming"}}
	cases := []struct {
		name      string
		findings  []fakes.Finding
		rules     map[string][]fakes.Outcome
		env       []string
		wantAgent string
		wantStet  string
		wantErr   string
		wantLeft  bool
	}{
		{"no findings", nil, nil, nil,
			"plan:1 execute:1", seq(statusCmd, startCmd, reviewCmd, finishCmd), "", false},
		{"fixed in round 1", twoFindings(), map[string][]fakes.Outcome{"address": {fixAll}}, nil,
			"plan:1 execute:1 triage:1 address:1", seq(statusCmd, startCmd, reviewCmd, reviewCmd, finishCmd), "", false},
		{"fixed in round 2", twoFindings(), map[string][]fakes.Outcome{"address": {noFix, fixAll}}, nil,
			"plan:1 execute:1 triage:1 address:1 triage:1 address:1", seq(statusCmd, startCmd, reviewCmd, reviewCmd, reviewCmd, finishCmd), "", false},
		{"fixed one per round", three, map[string][]fakes.Outcome{"address": {fixOne}}, []string{"PEAL_MAX_ADDRESS_ROUNDS=3"},
			"plan:1 execute:1 triage:1 address:1 triage:1 address:1 triage:1 address:1", seq(statusCmd, startCmd, reviewCmd, reviewCmd, reviewCmd, reviewCmd, finishCmd), "", false},
		{"never fixed, fail", twoFindings(), nil, []string{"PEAL_MAX_ADDRESS_ROUNDS=2"},
			"plan:1 execute:1 triage:1 address:1 triage:1 address:1", seq(statusCmd, startCmd, reviewCmd, reviewCmd, reviewCmd, finishCmd), "2 finding(s) remain after 2 address round(s)", false},
		{"never fixed, warn", twoFindings(), nil, []string{"PEAL_MAX_ADDRESS_ROUNDS=1", "PEAL_ON_FINDINGS_REMAINING=warn"},
			"plan:1 execute:1 triage:1 address:1", seq(statusCmd, startCmd, reviewCmd, reviewCmd, finishCmd), "", true},
		{"zero rounds", twoFindings(), nil, []string{"PEAL_MAX_ADDRESS_ROUNDS=0"},
			"plan:1 execute:1", seq(statusCmd, startCmd, reviewCmd, finishCmd), "remain after 0 address round(s)", false},
		{"triage: nothing to address", twoFindings(), map[string][]fakes.Outcome{"triage": {{Stdout: "Looked at both. Nothing to address here."}}}, nil,
			"plan:1 execute:1 triage:1", seq(statusCmd, startCmd, reviewCmd, "dismiss F001 false_positive", "dismiss F002 false_positive", finishCmd), "", false},
		{"triage: bare no", twoFindings(), map[string][]fakes.Outcome{"triage": {{Stdout: "No."}}}, nil,
			"plan:1 execute:1 triage:1", seq(statusCmd, startCmd, reviewCmd, "dismiss F001 false_positive", "dismiss F002 false_positive", finishCmd), "", false},
		{"triage: fix one, dismiss the other", twoFindings(), map[string][]fakes.Outcome{"triage": {{Stdout: "F001 is noise. We need to fix F002 though."}}, "address": {fixAll}}, nil,
			"plan:1 execute:1 triage:1 address:1", seq(statusCmd, startCmd, reviewCmd, reviewCmd, "dismiss F001 false_positive", finishCmd), "", false},
		// stet never reviews again a hunk holding a dismissed finding: the
		// finding triage sets aside is dismissed only after the loop, so the
		// fix next to it is seen.
		{"triage sets one aside, the fix in its hunk is seen", sameHunk,
			map[string][]fakes.Outcome{"triage": {{Stdout: "F002 is noise. We need to fix F001."}}, "address": {fixOne}}, nil,
			"plan:1 execute:1 triage:1 address:1", seq(statusCmd, startCmd, reviewCmd, reviewCmd, "dismiss F002 false_positive", finishCmd), "", false},
		{"patterns instead of LLM triage", twoFindings(), map[string][]fakes.Outcome{"address": {fixAll}},
			[]string{"PEAL_STET_DISABLE_LLM_TRIAGE=true", "PEAL_STET_DISMISS_PATTERNS=vendor/|out_of_scope"},
			"plan:1 execute:1 address:1", seq(statusCmd, startCmd, reviewCmd, reviewCmd, "dismiss F002 out_of_scope", finishCmd), "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "## Task 1\nA\n")
			env := append(h.withStet(fakes.StetScenario{}), tc.env...)
			rules := tc.rules
			if tc.findings != nil {
				rules = withRules(map[string][]fakes.Outcome{"execute": plants(tc.findings...)}, tc.rules)
			}
			h.scenario(rules)
			out, err := h.run(env...)
			if h.keys() != tc.wantAgent {
				t.Errorf("agent calls %q\nwant        %q", h.keys(), tc.wantAgent)
			}
			if h.stetCmds() != tc.wantStet {
				t.Errorf("stet calls %q\nwant       %q", h.stetCmds(), tc.wantStet)
			}
			if got := testgit.Git(t, h.repo, "status", "--porcelain"); got != "" {
				t.Errorf("the run left uncommitted changes: %q", got)
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

// TestWhyNoRound: a task that went through Phase 3 and was asked to fix
// nothing says why in the run record: nothing reviewed it, the review found
// nothing, or every finding was dismissed; a task whose findings were fixed
// says nothing.
func TestWhyNoRound(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		stet     bool
		findings []fakes.Finding
		rules    map[string][]fakes.Outcome
		env      []string
		want     string
	}{
		{"no stet", false, nil, nil, nil, "unreviewed"},
		{"no findings", true, nil, nil, nil, "no_findings"},
		{"triage dismissed all", true, twoFindings(), map[string][]fakes.Outcome{"triage": {{Stdout: "Nothing to address here."}}}, nil, "all_dismissed"},
		{"patterns dismissed all", true, twoFindings()[1:], nil,
			[]string{"PEAL_STET_DISABLE_LLM_TRIAGE=true", "PEAL_STET_DISMISS_PATTERNS=vendor/|out_of_scope"}, "all_dismissed"},
		{"fixed in round 1", true, twoFindings(), map[string][]fakes.Outcome{"address": {{StetFix: -1}}}, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "## Task 1\nA\n")
			env := tc.env
			if tc.stet {
				env = append(h.withStet(fakes.StetScenario{}), tc.env...)
			}
			rules := tc.rules
			if tc.findings != nil {
				rules = withRules(map[string][]fakes.Outcome{"execute": plants(tc.findings...)}, tc.rules)
			}
			h.scenario(rules)
			if _, err := h.run(env...); err != nil {
				t.Fatal(err)
			}
			events, _, err := state.ReadRecord(filepath.Join(h.stateDir, state.RecordName))
			if err != nil {
				t.Fatal(err)
			}
			ends := 0
			for _, ev := range events {
				if ev.Ev == state.EvTaskEnd {
					ends++
					if ev.NoRound != tc.want || ev.Result != "completed" {
						t.Errorf("task_end %+v: no_round %q, want %q", ev, ev.NoRound, tc.want)
					}
				}
			}
			if ends != 1 {
				t.Fatalf("%d task_end lines, want 1", ends)
			}
		})
	}
}

// TestWorkCommittedBeforeEachReview: with the defaults (commit_after_phase2
// unset) the task's work is committed before its review and each address
// round's fix before the next, so stet sees them.
func TestWorkCommittedBeforeEachReview(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nAdd the parser\n")
	env := h.withStet(fakes.StetScenario{})
	h.scenario(map[string][]fakes.Outcome{"plan": {{Stdout: "Write parse.go\nthen test it"}}, "execute": plants(twoFindings()...),
		"address": {{StetFix: 1}, {StetFix: 1}}})
	out, err := h.run(env...)
	if err != nil || !slices.Equal(out.Completed, []int{1}) {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
	want := []string{"root", "peal: task 1 - Write parse.go", "peal: task 1 - address round 1", "peal: task 1 - address round 2"}
	if got := h.commits(); !slices.Equal(got, want) {
		t.Fatalf("commits %q, want %q", got, want)
	}
	if h.keys() != "plan:1 execute:1 triage:1 address:1 triage:1 address:1" {
		t.Fatalf("agent %q", h.keys())
	}
}

// TestReviewCannotSeeTheWork: a configuration or repository where stet could
// not see the task's work is an error before any agent call.
func TestReviewCannotSeeTheWork(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		setup   func(h *harness)
		env     []string
		wantErr []string
	}{
		{"commit_after_phase2 = false", nil, []string{"PEAL_COMMIT_AFTER_PHASE2=false"}, []string{"commit_after_phase2", "set by PEAL_COMMIT_AFTER_PHASE2", "stet_path", "stet_commands"}},
		{"no commit yet", func(h *harness) { testgit.Git(h.t, h.repo, "update-ref", "-d", "HEAD") }, nil, []string{"has no commit yet"}},
		{"uncommitted changes", func(h *harness) { os.WriteFile(filepath.Join(h.repo, "notes.txt"), []byte("mine"), 0o644) }, nil,
			[]string{"uncommitted changes (notes.txt)", "stet_start_extra_args"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "## Task 1\nA\n")
			env := append(h.withStet(fakes.StetScenario{}), tc.env...)
			if tc.setup != nil {
				tc.setup(h)
			}
			_, err := h.run(env...)
			for _, want := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v, want it to name %q", err, want)
				}
			}
			if h.keys() != "" {
				t.Fatalf("agent called: %s", h.keys())
			}
		})
	}
	// --allow-dirty in stet_start_extra_args lets the user's changes in.
	h := newHarness(t, "## Task 1\nA\n")
	env := h.withStet(fakes.StetScenario{})
	os.WriteFile(filepath.Join(h.repo, "notes.txt"), []byte("mine"), 0o644)
	if _, err := h.run(append(env, "PEAL_STET_START_EXTRA_ARGS=--allow-dirty")...); err != nil {
		t.Fatal(err)
	}
	if h.stetCmds() != seq(statusCmd, "start SHA --allow-dirty", reviewCmd, finishCmd) {
		t.Fatalf("stet %q", h.stetCmds())
	}
}

// TestFindingsBelongToTheirTask: each task has its own review session, from
// the commit before it: task 2 is not charged with the findings task 1 left,
// and its change is reviewed even in the hunk where task 1's finding was
// dismissed.
func TestFindingsBelongToTheirTask(t *testing.T) {
	t.Parallel()
	t.Run("leftovers", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "## Task 1\nA\n## Task 2\nB\n")
		env := append(h.withStet(fakes.StetScenario{}), "PEAL_MAX_ADDRESS_ROUNDS=1", "PEAL_ON_FINDINGS_REMAINING=warn")
		h.scenario(map[string][]fakes.Outcome{"execute:1": plants(twoFindings()...),
			"execute:2": {{WriteFiles: map[string]string{"d.go": "package d\n"}}}})
		out, err := h.run(env...)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(out.WithFindings, []int{1}) || !slices.Equal(out.Completed, []int{2}) {
			t.Fatalf("outcome %+v: task 2 was charged with task 1's findings", out)
		}
		if h.keys() != "plan:1 execute:1 triage:1 address:1 plan:2 execute:2" {
			t.Fatalf("agent %q", h.keys())
		}
		want := seq(statusCmd, startCmd, reviewCmd, reviewCmd, finishCmd, startCmd, reviewCmd, finishCmd)
		if h.stetCmds() != want {
			t.Fatalf("stet %q\nwant %q", h.stetCmds(), want)
		}
	})
	t.Run("dismissed hunk", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "## Task 1\nA\n## Task 2\nB\n")
		env := h.withStet(fakes.StetScenario{})
		h.scenario(map[string][]fakes.Outcome{
			"execute:1": plants(twoFindings()[0]),
			"triage:1":  {{Stdout: "Nothing to address."}},
			"execute:2": plants(fakes.Finding{ID: "F004", File: "a.go", Severity: "error", Message: "race"}),
			"address":   {{StetFix: -1}},
		})
		out, err := h.run(append(env, "PEAL_ON_FINDINGS_REMAINING=warn", "PEAL_MAX_ADDRESS_ROUNDS=1")...)
		if err != nil || !slices.Equal(out.Completed, []int{1, 2}) {
			t.Fatalf("err %v, outcome %+v", err, out)
		}
		// Task 2's review found F004 next to the dismissed F001 and its
		// address round fixed it.
		if h.keys() != "plan:1 execute:1 triage:1 plan:2 execute:2 triage:2 address:2" {
			t.Fatalf("agent %q: task 2's change was not reviewed", h.keys())
		}
	})
}

// TestStetFilesStayOut: stet's state and worktrees live in peal's state
// folder, which a run creates with a .gitignore holding "*": nothing of peal
// or stet is committed, and after the run git status shows nothing.
func TestStetFilesStayOut(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n## Task 2\nB\n")
	env := h.withStet(fakes.StetScenario{})
	// A .review folder of the user's own stet sessions is never committed.
	os.MkdirAll(filepath.Join(h.repo, ".review"), 0o755)
	os.WriteFile(filepath.Join(h.repo, ".review", "history.jsonl"), []byte("{}\n"), 0o644)
	h.scenario(map[string][]fakes.Outcome{"execute": plants(twoFindings()...), "address": {{StetFix: -1}}})
	stateDir := filepath.Join(h.repo, ".peal")
	_, err := h.run(append(env, "PEAL_STATE_DIR="+stateDir, "PEAL_STET_START_EXTRA_ARGS=--allow-dirty")...)
	if err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(stateDir, ".gitignore")); err != nil || string(data) != "*\n" {
		t.Fatalf(".gitignore %q, %v", data, err)
	}
	files := testgit.Git(t, h.repo, "log", "--name-only", "--format=")
	if strings.Contains(files, ".peal") || strings.Contains(files, ".review") {
		t.Fatalf("peal or stet files were committed:\n%s", files)
	}
	if got := testgit.Git(t, h.repo, "status", "--porcelain"); got != "?? .review/" {
		t.Fatalf("git status %q: only the user's own folder may show", got)
	}
	for _, c := range h.stetCalls() {
		if c.Env["STET_STATE_DIR"] != filepath.Join(stateDir, review.Folder, "stet") || c.Env["STET_WORKTREE_ROOT"] != filepath.Join(stateDir, review.Folder, "worktrees") {
			t.Fatalf("stet %s ran with %v", c.Cmd, c.Env)
		}
	}
}

// TestStetExitCodes: exit 0 with findings is findings; exit 1 is a stet
// failure that on_stet_fail handles, reported by stet's own message; exit 2
// (the review model is unreachable) is never findings, is retried like a
// network failure and stops the run with an unreachable error.
func TestStetExitCodes(t *testing.T) {
	t.Parallel()
	failure := fakes.Outcome{Exit: 1, Stderr: "\x1b[31mCould not compute hunks to review.\x1b[0m\nDetails: Could not compute diff.\nHint: run stet doctor\n"}
	const one, two = "## Task 1\nA\n", "## Task 1\nA\n## Task 2\nB\n"
	cases := []struct {
		name      string
		plan      string
		scenario  fakes.StetScenario
		env       []string
		wantAgent string
		wantStet  string
		wantErr   string
		check     func(t *testing.T, out Outcome, err error)
	}{
		{"exit 1, fail", one, fakes.StetScenario{Rules: map[string][]fakes.Outcome{"run": {failure}}}, nil,
			"plan:1 execute:1", seq(statusCmd, startCmd, "run --output=json --stream", finishCmd),
			"stet run: stet failed after 1 attempt: exited with status 1: Could not compute hunks to review. (Could not compute diff.)", nil},
		{"exit 1, retry_once", one, fakes.StetScenario{Rules: map[string][]fakes.Outcome{"run": {failure, {}}}}, []string{"PEAL_ON_STET_FAIL=retry_once"},
			"plan:1 execute:1", seq(statusCmd, startCmd, "run --output=json --stream", reviewCmd, finishCmd), "", nil},
		{"exit 1, skip", one, fakes.StetScenario{Rules: map[string][]fakes.Outcome{"run": {failure}}}, []string{"PEAL_ON_STET_FAIL=skip"},
			"plan:1 execute:1", seq(statusCmd, startCmd, "run --output=json --stream", finishCmd), "",
			func(t *testing.T, out Outcome, err error) {
				if err != nil || !slices.Equal(out.Completed, []int{1}) || !slices.Equal(out.ReviewSkipped, []int{1}) || out.ExitCode != ExitOK {
					t.Fatalf("err %v, outcome %+v", err, out)
				}
			}},
		{"exit 2", two, fakes.StetScenario{ModelDown: true}, []string{"PEAL_NETWORK_RETRY_COUNT=2", "PEAL_NETWORK_RETRY_DELAY_SEC=0", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true"},
			"plan:1 execute:1", seq(statusCmd, startCmd, "run --output=json --stream", "run --output=json --stream", "run --output=json --stream", finishCmd),
			"the review model looks unreachable: stet run exited 2 on 3 attempts; stet says: OpenAI-compat server (e.g. LM Studio) unreachable at http://127.0.0.1:9/v1. Is the server running?",
			func(t *testing.T, out Outcome, err error) {
				var ue *phase.UnreachableError
				if !errors.As(err, &ue) {
					t.Fatalf("err %v is not an unreachable error (exit 4)", err)
				}
			}},
		// network_give_up_sec reaches stet's calls too: the first retry
		// would start past it, so none does.
		{"exit 2, give up", two, fakes.StetScenario{ModelDown: true}, []string{"PEAL_NETWORK_RETRY_COUNT=2", "PEAL_NETWORK_RETRY_DELAY_SEC=2", "PEAL_NETWORK_GIVE_UP_SEC=1"},
			"plan:1 execute:1", seq(statusCmd, startCmd, "run --output=json --stream", finishCmd), "stet run exited 2 on 1 attempt", nil},
		{"exit 2 under skip still stops", two, fakes.StetScenario{ModelDown: true}, []string{"PEAL_NETWORK_RETRY_COUNT=0", "PEAL_ON_STET_FAIL=skip"},
			"plan:1 execute:1", seq(statusCmd, startCmd, "run --output=json --stream", finishCmd), "the review model looks unreachable", nil},
		// A bad request is a refusal, not an outage: not retried, and the
		// run stops (exit 1), whatever on_stet_fail says.
		{"exit 2, bad request", two, fakes.StetScenario{ModelRefused: true},
			[]string{"PEAL_NETWORK_RETRY_COUNT=2", "PEAL_NETWORK_RETRY_DELAY_SEC=0", "PEAL_ON_STET_FAIL=retry_once", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true"},
			"plan:1 execute:1", seq(statusCmd, startCmd, "run --output=json --stream", finishCmd),
			"the review model refused stet's request, which no retry can fix: stet run exited 2; stet says: LLM bad request at http://127.0.0.1:9/v1. " +
				"openai chat: ollama bad request: HTTP 404; check stet's model and provider settings: STET_MODEL, STET_PROVIDER,",
			func(t *testing.T, out Outcome, err error) {
				var ue *phase.UnreachableError
				var br *review.BadRequestError
				if errors.As(err, &ue) || !errors.As(err, &br) || !phase.EndsRun(err) {
					t.Fatalf("err %v: want a bad request that ends the run, not an outage (exit 4)", err)
				}
			}},
		{"exit 2, bad request under skip still stops", two, fakes.StetScenario{ModelRefused: true}, []string{"PEAL_ON_STET_FAIL=skip"},
			"plan:1 execute:1", seq(statusCmd, startCmd, "run --output=json --stream", finishCmd), "LLM bad request", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tc.plan)
			env := append(h.withStet(tc.scenario), tc.env...)
			h.scenario(map[string][]fakes.Outcome{"execute:1": plants(twoFindings()...)})
			if tc.plan == one {
				h.scenario(nil)
			}
			out, err := h.run(env...)
			if tc.check != nil {
				tc.check(t, out, err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v\nwant %q", err, tc.wantErr)
			}
			if err != nil && (strings.Contains(err.Error(), "Hint") || strings.Contains(err.Error(), "\x1b")) {
				t.Fatalf("err %q quotes stet's hint or colour codes", err)
			}
			if h.keys() != tc.wantAgent || h.stetCmds() != tc.wantStet {
				t.Fatalf("agent %q (want %q)\nstet %q\nwant %q", h.keys(), tc.wantAgent, h.stetCmds(), tc.wantStet)
			}
		})
	}
}

// TestStartFailures: a failed start follows on_stet_fail and quotes stet's
// message; retry_once retries from a clean slate.
func TestStartFailures(t *testing.T) {
	t.Parallel()
	exists := fakes.Outcome{Exit: 1, Stderr: "worktree already exists\nHint: Run 'stet finish' to end the current review and remove the worktree, then run 'stet start x' again.\n"}
	cases := []struct {
		name      string
		mode      string
		start     []fakes.Outcome
		wantAgent string
		wantStet  string
		wantErr   string
		skipped   bool
	}{
		{"fail", "fail", []fakes.Outcome{exists}, "", seq(statusCmd, startCmd), "stet start: stet failed after 1 attempt: exited with status 1: worktree already exists", false},
		{"retry_once", "retry_once", []fakes.Outcome{exists, {}}, "plan:1 execute:1", seq(statusCmd, startCmd, statusCmd, startCmd, reviewCmd, finishCmd), "", false},
		{"skip", "skip", []fakes.Outcome{exists}, "plan:1 execute:1", seq(statusCmd, startCmd), "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "## Task 1\nA\n")
			env := h.withStet(fakes.StetScenario{Rules: map[string][]fakes.Outcome{"start": tc.start}})
			h.scenario(map[string][]fakes.Outcome{"execute": {{WriteFiles: map[string]string{"d.go": "package d\n"}}}})
			out, err := h.run(append(env, "PEAL_ON_STET_FAIL="+tc.mode)...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "Hint") {
					t.Fatalf("err = %v, want %q without the hint", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if h.keys() != tc.wantAgent || h.stetCmds() != tc.wantStet {
				t.Fatalf("agent %q (want %q), stet %q (want %q)", h.keys(), tc.wantAgent, h.stetCmds(), tc.wantStet)
			}
			if tc.skipped {
				sum, _ := h.summary()
				if !slices.Equal(out.ReviewSkipped, []int{1}) || !slices.Equal(sum.TasksReviewSkipped, []int{1}) || !slices.Equal(sum.TasksCompleted, []int{1}) {
					t.Fatalf("outcome %+v, summary %+v", out, sum)
				}
				if got := h.commits(); len(got) != 2 {
					t.Fatalf("the task's work was not committed without a review: %q", got)
				}
			}
		})
	}
}

// TestRecovery: a session and a worktree that a crashed run left behind are
// cleared before the first task; the run then reviews normally.
func TestRecovery(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	env := h.withStet(fakes.StetScenario{})
	stetState := filepath.Join(h.stateDir, review.Folder, "stet")
	worktrees := filepath.Join(h.stateDir, review.Folder, "worktrees")
	// A crashed run: a session at an older commit, with its worktree, and an
	// orphan worktree of an even older session.
	base := testgit.Git(t, h.repo, "rev-parse", "HEAD")
	os.WriteFile(filepath.Join(h.repo, "x.go"), []byte("package x\n"), 0o644)
	testgit.Git(t, h.repo, "add", "-A")
	testgit.Git(t, h.repo, "commit", "-q", "-m", "work")
	orphan := filepath.Join(worktrees, "stet-orphan")
	os.MkdirAll(worktrees, 0o755)
	testgit.Git(t, h.repo, "worktree", "add", "-q", "--detach", orphan, base)
	stale := filepath.Join(worktrees, "stet-"+base[:12])
	testgit.Git(t, h.repo, "worktree", "add", "-q", "--detach", stale, base)
	if err := fakes.WriteSession(stetState, fakes.Session{Baseline: base, Worktree: stale}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.run(env...); err != nil {
		t.Fatal(err)
	}
	if want := seq(statusCmd, finishCmd, "cleanup", startCmd, reviewCmd, finishCmd); h.stetCmds() != want {
		t.Fatalf("stet %q, want %q", h.stetCmds(), want)
	}
	for _, wt := range []string{orphan, stale} {
		if _, err := os.Stat(wt); err == nil {
			t.Fatalf("worktree %s is still there", wt)
		}
	}
	// A second run on the same repository starts (and has nothing to do).
	os.WriteFile(h.plan, []byte("## Task 1\nA\n## Task 2\nB\n"), 0o644)
	if out, err := h.run(env...); err != nil || !slices.Equal(out.Completed, []int{2}) {
		t.Fatalf("second run: err %v, outcome %+v", err, out)
	}
}

// TestResumeReviewsTheEarlierWork: a run interrupted after a task's work was
// committed, but before its review ended, leaves the task unfinished; the
// next run's session for that task starts at the commit the first one
// started at, so the work committed before the interruption is reviewed.
func TestResumeReviewsTheEarlierWork(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	env := h.withStet(fakes.StetScenario{})
	base := testgit.Git(t, h.repo, "rev-parse", "HEAD")
	ready := readyPipe(t)
	h.scenario(map[string][]fakes.Outcome{
		"execute": plants(twoFindings()...),
		"triage":  {{WriteFiles: map[string]string{ready: "x"}, Hang: true}, {Stdout: "Fix both."}},
		"address": {{StetFix: -1}},
	})
	cfg := h.config(env...)
	r := startCfg(h, cfg)
	waitReady(t, ready)
	r.cancel(errors.New("SIGINT"))
	if _, err := r.wait(t); !isInterrupted(err) {
		t.Fatalf("err = %v", err)
	}
	before := len(h.stetCalls())
	out, err := h.run(env...)
	if err != nil || !slices.Equal(out.Completed, []int{1}) {
		t.Fatalf("second run: err %v, outcome %+v", err, out)
	}
	calls := h.stetCalls()[before:]
	if calls[1].Cmd != "start" || calls[1].Args[0] != base {
		t.Fatalf("the second run's session started at %v, want the first run's base %s", calls[1].Args, base)
	}
	// The second run found the findings again and fixed them.
	if got := strings.Join(fakes.Keys(h.calls()), " "); got != "plan:1 execute:1 triage:1 plan:1 execute:1 triage:1 address:1" {
		t.Fatalf("agent %q", got)
	}
}

// TestUnfinishedWorkIsKeptApart: the changes a failed task made are kept
// on a branch of their own and the work tree put back, so the next task is
// reviewed on its own work, and the user's branch holds only completed
// work.
func TestUnfinishedWorkIsKeptApart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n## Task 2\nB\n")
	env := h.withStet(fakes.StetScenario{})
	h.scenario(map[string][]fakes.Outcome{
		"execute:1": {{Plant: twoFindings(), Exit: 1, Stderr: "agent broke"}},
		"execute:2": {{WriteFiles: map[string]string{"d.go": "package d\n"}}},
	})
	out, err := h.run(append(env, "PEAL_CONTINUE_WITH_REMAINING_TASKS=true")...)
	if err != nil || !slices.Equal(out.Failed, []int{1}) || !slices.Equal(out.Completed, []int{2}) {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
	want := []string{"root", "peal: task 2 - fake plan output for task 2"}
	if got := h.commits(); !slices.Equal(got, want) {
		t.Fatalf("commits %q, want %q", got, want)
	}
	kept := keptBranches(t, h)
	if len(kept) != 1 || !strings.Contains(testgit.Git(t, h.repo, "show", kept[0]+":a.go"), "F001") {
		t.Fatalf("task 1's work is not on a kept branch: %q", kept)
	}
	if h.keys() != "plan:1 execute:1 plan:2 execute:2" {
		t.Fatalf("task 2 was charged with task 1's findings: %q", h.keys())
	}
}

// TestSlowReviewIsNotIdle: the idle timeout never stops a review, which is
// silent while the model works on a hunk.
func TestSlowReviewIsNotIdle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	env := h.withStet(fakes.StetScenario{HunkMS: 1500})
	h.scenario(map[string][]fakes.Outcome{"execute": plants(twoFindings()[0]), "address": {{StetFix: -1}}})
	if _, err := h.run(append(env, "PEAL_IDLE_TIMEOUT_SEC=1")...); err != nil {
		t.Fatal(err)
	}
	if h.keys() != "plan:1 execute:1 triage:1 address:1" {
		t.Fatalf("agent %q", h.keys())
	}
}

// observedCalls records the calls an observer heard of.
type observedCalls struct {
	mu    sync.Mutex
	calls []phase.CallInfo
}

func (o *observedCalls) CallStarted(c phase.CallInfo) func() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, c)
	return nil
}

func (o *observedCalls) PlanLoaded(int) {}

// TestReviewProgress: the review streams its progress to the live status
// line; its events are never taken for findings.
func TestReviewProgress(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	env := h.withStet(fakes.StetScenario{})
	h.scenario(map[string][]fakes.Outcome{"execute": {{WriteFiles: map[string]string{"a.go": "package a\n", "b.go": "package b\n"}}}})
	var obs observedCalls
	h.extra = append(h.extra, WithObserver(&obs))
	if _, err := h.run(env...); err != nil {
		t.Fatal(err)
	}
	if h.keys() != "plan:1 execute:1" {
		t.Fatalf("progress events were taken for findings: %q", h.keys())
	}
	var details []string
	for _, c := range obs.calls {
		if c.Phase == "stet" && c.Detail != nil {
			details = append(details, c.Detail())
		}
	}
	if !slices.Equal(details, []string{"review: Reviewing hunk 2/2: b.go"}) {
		t.Fatalf("review details %q", details)
	}
}

// TestPromptTooLarge: a review too large for an argument is a clear error
// before the address call of a CLI that takes its prompt as an argument (the
// Cursor CLI), not a failed exec; a CLI that reads it on stdin gets it whole.
func TestPromptTooLarge(t *testing.T) {
	t.Parallel()
	huge := fakes.Finding{ID: "F001", File: "a.go", Severity: "error", Message: strings.Repeat("x", 140<<10)}
	h := newHarness(t, "## Task 1\nA\n")
	env := h.withStet(fakes.StetScenario{})
	h.scenario(map[string][]fakes.Outcome{"execute": plants(huge)})
	_, err := h.run(append(env, "PEAL_STET_DISABLE_LLM_TRIAGE=true", "PEAL_ON_STET_FAIL=retry_once")...)
	var pe *agent.PromptTooLongError
	if !errors.As(err, &pe) || pe.Phase != "address" || !strings.Contains(err.Error(), "longer than one command-line argument") {
		t.Fatalf("err = %v", err)
	}
	if h.keys() != "plan:1 execute:1" {
		t.Fatalf("agent %q", h.keys())
	}

	h2, kind := kindHarness(t, "claude", "## Task 1\nA\n")
	env2 := h2.withStet(fakes.StetScenario{})
	h2.scenario(map[string][]fakes.Outcome{"execute": plants(huge), "address": {{StetFix: -1}}})
	if _, err := h2.run(append(append(env2, kind...), "PEAL_STET_DISABLE_LLM_TRIAGE=true")...); err != nil {
		t.Fatalf("a CLI reading its prompt on stdin: %v", err)
	}
	calls := h2.calls()
	if h2.keys() != "plan:1 execute:1 address:1" || !strings.Contains(calls[2].Stdin, huge.Message) {
		t.Fatalf("agent %q", h2.keys())
	}
}

func TestFindingsRemainingError(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	env := h.withStet(fakes.StetScenario{})
	h.scenario(map[string][]fakes.Outcome{"execute": plants(twoFindings()...)})
	_, err := h.run(append(env, "PEAL_MAX_ADDRESS_ROUNDS=1")...)
	var fe *review.FindingsRemainingError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v", err)
	}
	// The task's work is kept on a branch, not on the user's: the error
	// names the commit it was reviewed at, and the branch.
	kept := keptBranches(t, h)
	if len(kept) != 1 || testgit.Git(t, h.repo, "log", "--format=%s", "-1") != "root" {
		t.Fatalf("kept %q, HEAD %s", kept, testgit.Git(t, h.repo, "log", "--format=%s", "-1"))
	}
	head := testgit.Git(t, h.repo, "rev-parse", kept[0])
	if fe.Task != 1 || fe.Rounds != 1 || fe.Remaining != 2 || fe.Head != head || !strings.Contains(fe.Output, "nil dereference") {
		t.Fatalf("error %+v", fe)
	}
	if !strings.Contains(err.Error(), "task 1:") || !strings.Contains(err.Error(), head) || !strings.Contains(err.Error(), "kept on branch "+kept[0]) {
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
			t.Parallel()
			h := newHarness(t, "## Task 1\nA\n")
			env := h.withStet(fakes.StetScenario{})
			h.scenario(map[string][]fakes.Outcome{"execute": plants(twoFindings()...), "address": tc.address})
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
			t.Parallel()
			h := newHarness(t, "## Task 1\nA\n")
			env := h.withStet(fakes.StetScenario{})
			h.scenario(map[string][]fakes.Outcome{"execute": plants(twoFindings()...), "triage": {tc.triage}, "address": {{StetFix: -1}}})
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
		{"review times out: fail", "fail", map[string][]fakes.Outcome{"run": {hang}}, nil, "plan:1 execute:1",
			seq(statusCmd, startCmd, "run --output=json --stream", finishCmd), "timed out", false},
		{"review times out: retry_once", "retry_once", map[string][]fakes.Outcome{"run": {hang}}, nil, "plan:1 execute:1",
			seq(statusCmd, startCmd, "run --output=json --stream", "run --output=json --stream", finishCmd), "timed out", false},
		{"review times out: skip", "skip", map[string][]fakes.Outcome{"run": {hang}}, nil, "plan:1 execute:1",
			seq(statusCmd, startCmd, "run --output=json --stream", finishCmd), "", false},
		{"address loop fails: retry_once reruns it", "retry_once", nil, map[string][]fakes.Outcome{"address": {{Exit: 1}}},
			"plan:1 execute:1 triage:1 address:1 triage:1 address:1", seq(statusCmd, startCmd, reviewCmd, finishCmd), "address failed", false},
		{"address loop fails: skip", "skip", nil, map[string][]fakes.Outcome{"address": {{Exit: 1}}},
			"plan:1 execute:1 triage:1 address:1", seq(statusCmd, startCmd, reviewCmd, finishCmd), "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "## Task 1\nA\n")
			env := h.withStet(fakes.StetScenario{Rules: tc.stetRules})
			h.scenario(withRules(map[string][]fakes.Outcome{"execute": plants(twoFindings()...)}, tc.agent))
			out, err := h.run(append(env, "PEAL_ON_STET_FAIL="+tc.mode, "PEAL_PHASE_TIMEOUT_SEC=1")...)
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

// TestCustomStetCommands: custom commands keep the linter convention and
// commit only under commit_after_phase2.
func TestCustomStetCommands(t *testing.T) {
	t.Parallel()
	t.Run("stet as custom commands, with commits", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "## Task 1\nA\n## Task 2\nB\n")
		h.withStet(fakes.StetScenario{})
		h.scenario(map[string][]fakes.Outcome{"execute:1": plants(twoFindings()...), "address:1": {{StetFix: -1}}})
		cmds := "PEAL_STET_COMMANDS=" + fakeStet + " start HEAD, " + fakeStet + " run --output=json --strictness strict"
		if _, err := h.run(cmds, "PEAL_COMMIT_AFTER_PHASE2=true"); err != nil {
			t.Fatal(err)
		}
		custom := "run --output=json --strictness strict"
		// Session start runs every command once; each review runs the last one;
		// no triage, no dismiss, no finish.
		if want := seq("start HEAD", custom, custom, custom, custom); h.stetCmds() != want {
			t.Fatalf("stet %q, want %q", h.stetCmds(), want)
		}
		if h.keys() != "plan:1 execute:1 address:1 plan:2 execute:2" {
			t.Fatalf("agent %q", h.keys())
		}
	})
	t.Run("a linter: non-zero exit means findings", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "## Task 1\nA\n")
		// The command's first run is the session start; then a review with
		// findings, and one without.
		h.withStet(fakes.StetScenario{Rules: map[string][]fakes.Outcome{"run": {{Stdout: "ready\n"}, {Exit: 3, Stdout: "a.go:1 style\n"}, {Stdout: "reviewing...\n0 finding(s).\n"}}}})
		if _, err := h.run("PEAL_STET_COMMANDS=" + fakeStet + " run"); err != nil {
			t.Fatal(err)
		}
		if h.keys() != "plan:1 execute:1 address:1" || h.stetCmds() != seq("run", "run", "run") {
			t.Fatalf("agent %q, stet %q", h.keys(), h.stetCmds())
		}
		if got := h.commits(); len(got) != 1 {
			t.Fatalf("custom mode committed without commit_after_phase2: %q", got)
		}
	})
}

// TestCustomStetPolicies: Peal's rules for custom review commands. The
// command runs once at session start, then once per review; a non-zero exit
// is findings, only a timeout (or a failed start) is a stet failure, and
// on_stet_fail and on_findings_remaining apply as with stet.
func TestCustomStetPolicies(t *testing.T) {
	t.Parallel()
	ready := fakes.Outcome{Stdout: "ready\n"}
	lint := fakes.Outcome{Exit: 1, Stdout: "a.go:1 style\n"}
	clean := fakes.Outcome{Stdout: "reviewing...\n0 finding(s).\n"}
	cases := []struct {
		name      string
		runs      []fakes.Outcome // the command's outcomes, call by call (the last repeats)
		env       []string
		wantAgent string
		wantRuns  int
		wantErr   string
		want      Outcome
	}{
		{"findings remain: fail", []fakes.Outcome{ready, lint}, []string{"PEAL_MAX_ADDRESS_ROUNDS=2"},
			"plan:1 execute:1 address:1 address:1", 4, "1 finding(s) remain after 2 address round(s)", Outcome{}},
		{"findings remain: warn", []fakes.Outcome{ready, lint}, []string{"PEAL_MAX_ADDRESS_ROUNDS=2", "PEAL_ON_FINDINGS_REMAINING=warn"},
			"plan:1 execute:1 address:1 address:1", 4, "", Outcome{ExitCode: 2, WithFindings: []int{1}}},
		{"no rounds: findings remain at once", []fakes.Outcome{ready, lint}, []string{"PEAL_MAX_ADDRESS_ROUNDS=0"},
			"plan:1 execute:1", 2, "remain after 0 address round(s)", Outcome{}},
		{"a silent non-zero exit is findings", []fakes.Outcome{ready, {Exit: 1}, clean}, nil,
			"plan:1 execute:1 address:1", 3, "", Outcome{Completed: []int{1}}},
		{"review times out: fail", []fakes.Outcome{ready, {Hang: true}}, []string{"PEAL_PHASE_TIMEOUT_SEC=1"},
			"plan:1 execute:1", 2, "timed out", Outcome{}},
		{"review times out: skip", []fakes.Outcome{ready, {Hang: true}}, []string{"PEAL_PHASE_TIMEOUT_SEC=1", "PEAL_ON_STET_FAIL=skip"},
			"plan:1 execute:1", 2, "", Outcome{Completed: []int{1}, ReviewSkipped: []int{1}}},
		{"session start fails: fail", []fakes.Outcome{{Exit: 1, Stderr: "boom"}}, nil,
			"", 1, "boom", Outcome{}},
		{"session start fails: retry_once", []fakes.Outcome{{Exit: 1, Stderr: "boom"}, ready, clean}, []string{"PEAL_ON_STET_FAIL=retry_once"},
			"plan:1 execute:1", 3, "", Outcome{Completed: []int{1}}},
		{"session start fails: skip turns Phase 3 off", []fakes.Outcome{{Exit: 1, Stderr: "boom"}}, []string{"PEAL_ON_STET_FAIL=skip"},
			"plan:1 execute:1", 1, "", Outcome{Completed: []int{1}, ReviewSkipped: []int{1}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "## Task 1\nA\n")
			h.withStet(fakes.StetScenario{Rules: map[string][]fakes.Outcome{"run": tc.runs}})
			out, err := h.run(append([]string{"PEAL_STET_COMMANDS=" + fakeStet + " run"}, tc.env...)...)
			runs := strings.Repeat("run; ", tc.wantRuns)
			if h.keys() != tc.wantAgent || h.stetCmds() != strings.TrimSuffix(runs, "; ") {
				t.Fatalf("agent %q (want %q), stet %q (want %d runs)", h.keys(), tc.wantAgent, h.stetCmds(), tc.wantRuns)
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
			if out.ExitCode != tc.want.ExitCode || !slices.Equal(out.Completed, tc.want.Completed) ||
				!slices.Equal(out.WithFindings, tc.want.WithFindings) || !slices.Equal(out.ReviewSkipped, tc.want.ReviewSkipped) {
				t.Fatalf("outcome %+v, want %+v", out, tc.want)
			}
		})
	}
}

func TestStetResolution(t *testing.T) {
	t.Parallel()
	t.Run("stet_path not executable: no Phase 3", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "## Task 1\nA\n")
		h.withStet(fakes.StetScenario{})
		notExec := filepath.Join(h.tmp, "stet-not-exec")
		os.WriteFile(notExec, []byte("x"), 0o644)
		// The configuration refuses it; a run given one anyway reviews nothing.
		cfg := h.config()
		cfg.StetPath = notExec
		if _, err := h.runCfg(cfg); err != nil {
			t.Fatal(err)
		}
		if h.stetCmds() != "" || h.keys() != "plan:1 execute:1" || !strings.Contains(h.log.String(), "stet_path is not an executable file") {
			t.Fatalf("stet %q, agent %q", h.stetCmds(), h.keys())
		}
	})
	t.Run("stet found on PATH", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "## Task 1\nA\n")
		h.withStet(fakes.StetScenario{})
		h.extra = append(h.extra, func(s *settings) {
			s.lookPath = func(name string) (string, error) {
				if name != "stet" {
					t.Errorf("looked up %q", name)
				}
				return fakeStet, nil
			}
		})
		if _, err := h.run(); err != nil {
			t.Fatal(err)
		}
		if h.stetCmds() != seq(statusCmd, startCmd, reviewCmd, finishCmd) {
			t.Fatalf("stet %q", h.stetCmds())
		}
	})
}

func TestAddressPromptCarriesReviewAndSuggestions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	env := h.withStet(fakes.StetScenario{})
	h.scenario(map[string][]fakes.Outcome{"execute": plants(twoFindings()...), "address": {{StetFix: -1}}})
	if _, err := h.run(append(env, "PEAL_STET_START_EXTRA_ARGS=--strictness strict", "PEAL_STET_RUN_EXTRA_ARGS=--context 8k")...); err != nil {
		t.Fatal(err)
	}
	c := h.calls()
	triage, address := c[2], c[3]
	tp, ap := triage.Argv[len(triage.Argv)-1], address.Argv[len(address.Argv)-1]
	if !strings.Contains(tp, "---STET---\n{\"findings\":[") || !strings.HasSuffix(tp, "Anything to address from this review?") {
		t.Errorf("triage prompt %q", tp)
	}
	if !strings.Contains(ap, "---STET---\n{\"findings\":[") || !strings.Contains(ap, "---SUGGESTIONS---\ncheck for nil first\n---SUGGESTIONS---") {
		t.Errorf("address prompt %q", ap)
	}
	for _, call := range []fakes.Call{triage, address} {
		if !slices.Contains(call.Argv, "--sandbox") || slices.Contains(call.Argv, "--plan") {
			t.Errorf("%s argv %q", call.Phase, call.Argv)
		}
	}
	run := "run --output=json --stream --context 8k; run --output=json --context 8k"
	if want := seq(statusCmd, "start SHA --strictness strict", run, run, finishCmd); h.stetCmds() != want {
		t.Fatalf("stet %q, want %q", h.stetCmds(), want)
	}
}

// TestPhase3FailureKeepsEarlierTasks: state is saved before the error of a
// later task's Phase 3, and that task's session is finished.
func TestPhase3FailureKeepsEarlierTasks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n## Task 2\nB\n## Task 3\nC\n")
	// The review of task 2 times out.
	env := h.withStet(fakes.StetScenario{Rules: map[string][]fakes.Outcome{"run": {{}, {}, {Hang: true}}}})
	h.scenario(map[string][]fakes.Outcome{"execute:2": {{WriteFiles: map[string]string{"x": "y"}}}})
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
// session (best effort) after stopping the agent. The cleanup calls run
// under the kill grace, not the phase timeout: a stet finish that hangs does
// not keep the run from ending (the wait's bound is well below the phase
// timeout of 600 s).
func TestInterruptedRunFinishesStet(t *testing.T) {
	t.Parallel()
	for name, finish := range map[string][]fakes.Outcome{"finish answers": nil, "finish hangs": {{Hang: true}}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "## Task 1\nA\n")
			env := h.withStet(fakes.StetScenario{Rules: map[string][]fakes.Outcome{"finish": finish}})
			ready := readyPipe(t)
			h.scenario(map[string][]fakes.Outcome{"execute": {{WriteFiles: map[string]string{ready: "x"}, Hang: true}}})
			r := startCfg(h, h.config(append(env, "PEAL_PHASE_TIMEOUT_SEC=600", "PEAL_KILL_GRACE_SEC=1")...))
			waitReady(t, ready)
			r.cancel(errors.New("SIGINT"))
			if _, err := r.wait(t); !isInterrupted(err) {
				t.Fatalf("err = %v", err)
			}
			if h.stetCmds() != seq(statusCmd, startCmd, finishCmd) {
				t.Fatalf("stet calls %q", h.stetCmds())
			}
		})
	}
}

// TestUnreadableTaskRecord: a record of the task under review that cannot
// be read is kept aside and the run goes on.
func TestUnreadableTaskRecord(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	env := h.withStet(fakes.StetScenario{})
	dir := filepath.Join(h.stateDir, review.Folder)
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "task.json"), []byte("{not json"), 0o644)
	os.WriteFile(filepath.Join(dir, ".task.json.tmp-1"), []byte("half"), 0o644) // a killed save's
	if _, err := h.run(env...); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".task.json.tmp-*")); len(left) != 0 {
		t.Fatalf("a killed save's temporary file was left: %v", left)
	}
	aside, _ := filepath.Glob(filepath.Join(dir, "task.json.corrupt-*"))
	if len(aside) != 1 || !strings.Contains(h.log.String(), "kept aside") {
		t.Fatalf("kept aside %q; log:\n%s", aside, h.log)
	}
	if data, _ := os.ReadFile(aside[0]); string(data) != "{not json" {
		t.Fatalf("the unreadable record was changed: %q", data)
	}
}

// stet_start_ref has no effect any more: a run that sets it says so, and the
// session still starts at the commit before the task.
func TestStetStartRefIgnored(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	env := h.withStet(fakes.StetScenario{})
	if _, err := h.run(append(env, "PEAL_STET_START_REF=main")...); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.log.String(), "stet_start_ref is ignored") {
		t.Fatalf("no warning in the log:\n%s", h.log)
	}
	for _, c := range h.stetCalls() {
		if c.Cmd == "start" && slices.Contains(c.Args, "main") {
			t.Fatalf("stet start was given the ref: %v", c.Args)
		}
	}
}

// TestStetOutputFormat: a user's --stream (or another argument that chooses
// stet's output format) in stet_run_extra_args is dropped from both review
// commands with a warning, so that "nothing to review" stays no finding; and
// a list command that prints anything but the JSON findings document is a
// stet failure under on_stet_fail, never a finding.
func TestStetOutputFormat(t *testing.T) {
	t.Parallel()
	t.Run("format arguments are dropped", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "## Task 1\nA\n")
		env := append(h.withStet(fakes.StetScenario{}), "PEAL_STET_RUN_EXTRA_ARGS=--stream --strictness strict --output human --json")
		out, err := h.run(env...)
		if err != nil || !slices.Equal(out.Completed, []int{1}) || out.ExitCode != ExitOK {
			t.Fatalf("err %v, outcome %+v\n%s", err, out, h.log)
		}
		want := seq(statusCmd, startCmd, "run --output=json --stream --strictness strict", "run --output=json --strictness strict", finishCmd)
		if h.stetCmds() != want || h.keys() != "plan:1 execute:1" {
			t.Fatalf("stet %q, want %q; agent %q", h.stetCmds(), want, h.keys())
		}
		if !strings.Contains(h.log.String(), `set_by=PEAL_STET_RUN_EXTRA_ARGS dropped="--stream --output human --json"`) {
			t.Fatalf("no warning naming the dropped arguments:\n%s", h.log)
		}
	})
	events := fakes.Outcome{Stdout: `{"msg":"Nothing to review.","type":"progress"}` + "\n" + `{"type":"done"}` + "\n"}
	human := fakes.Outcome{Stdout: "0 finding(s).\n"}
	cases := []struct {
		name      string
		list      []fakes.Outcome // the outcomes of the run calls: stream, list, stream, list...
		env       []string
		wantStet  string
		wantErr   string
		completed []int
		skipped   []int
	}{
		{"events, fail", []fakes.Outcome{{}, events}, nil, seq(statusCmd, startCmd, reviewCmd, finishCmd),
			`stet run: stet failed after 1 attempt: printed no JSON findings document (an argument that changes stet's output format?): {"msg":"Nothing to review.","type":"progress"} {"type":"done"}`, nil, nil},
		{"human format, fail", []fakes.Outcome{{}, human}, nil, seq(statusCmd, startCmd, reviewCmd, finishCmd),
			"printed no JSON findings document (an argument that changes stet's output format?): 0 finding(s).", nil, nil},
		{"events, retry_once", []fakes.Outcome{{}, events, {}}, []string{"PEAL_ON_STET_FAIL=retry_once"},
			seq(statusCmd, startCmd, reviewCmd, "run --output=json", finishCmd), "", []int{1}, nil},
		{"events, skip", []fakes.Outcome{{}, events, {}}, []string{"PEAL_ON_STET_FAIL=skip"},
			seq(statusCmd, startCmd, reviewCmd, finishCmd), "", []int{1}, []int{1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "## Task 1\nA\n")
			env := append(h.withStet(fakes.StetScenario{Rules: map[string][]fakes.Outcome{"run": tc.list}}), tc.env...)
			out, err := h.run(env...)
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v\nwant %q", err, tc.wantErr)
			}
			if tc.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if h.keys() != "plan:1 execute:1" || h.stetCmds() != tc.wantStet {
				t.Fatalf("agent %q (the output was taken for a finding?), stet %q, want %q", h.keys(), h.stetCmds(), tc.wantStet)
			}
			if !slices.Equal(out.Completed, tc.completed) || !slices.Equal(out.ReviewSkipped, tc.skipped) || !slices.Equal(out.WithFindings, nil) {
				t.Fatalf("outcome %+v", out)
			}
		})
	}
}

// TestFixByDeletion: a fix that deletes the flagged code leaves no hunk that
// covers the finding's line, so stet (and the fake, which follows it) never
// resolves the finding; peal dismisses it as already_correct, with one log
// line naming it, and the task completes after one round.
func TestFixByDeletion(t *testing.T) {
	t.Parallel()
	f := fakes.Finding{ID: "F001", File: "a.txt", Severity: "error", Message: "the total is never checked"}
	marker := fakes.MarkerLine(f)
	cases := []struct {
		name    string
		before  string // a.txt committed before the run ("" none)
		execute fakes.Outcome
		fix     fakes.Outcome
		why     string
	}{
		{"the flagged line was the file's last", "",
			fakes.Outcome{WriteFiles: map[string]string{"a.txt": "first\n" + marker + "\n"}},
			fakes.Outcome{WriteFiles: map[string]string{"a.txt": "first\n"}}, "its line is past the end of the file"},
		{"the file is removed", "",
			fakes.Outcome{WriteFiles: map[string]string{"a.txt": "first\n" + marker + "\nlast\n"}},
			fakes.Outcome{RemoveFiles: []string{"a.txt"}}, "its file is gone"},
		{"the fix undid the change", "1\n2\n3\n4\n5\n6\n7\n8\n9\n",
			fakes.Outcome{WriteFiles: map[string]string{"a.txt": "1\n2\n3\n4\n" + marker + "\n5\n6\n7\n8\n9\n"}},
			fakes.Outcome{WriteFiles: map[string]string{"a.txt": "1\n2\n3\n4\n5\n6\n7\n8\n9\n"}}, "no change of the task covers its line any more"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "## Task 1\nA\n")
			env := append(h.withStet(fakes.StetScenario{}), "PEAL_MAX_ADDRESS_ROUNDS=2")
			if tc.before != "" {
				os.WriteFile(filepath.Join(h.repo, "a.txt"), []byte(tc.before), 0o644)
				testgit.Git(t, h.repo, "add", "a.txt")
				testgit.Git(t, h.repo, "commit", "-q", "-m", "before")
			}
			// A second round, if any, changes nothing.
			h.scenario(map[string][]fakes.Outcome{"execute": {tc.execute}, "address": {tc.fix, {}}})
			out, err := h.run(env...)
			if err != nil || !slices.Equal(out.Completed, []int{1}) || out.ExitCode != ExitOK {
				t.Fatalf("err %v, outcome %+v", err, out)
			}
			wantStet := seq(statusCmd, startCmd, reviewCmd, reviewCmd, "dismiss F001 already_correct", finishCmd)
			if h.keys() != "plan:1 execute:1 triage:1 address:1" || h.stetCmds() != wantStet {
				t.Fatalf("agent %q, stet %q, want %q", h.keys(), h.stetCmds(), wantStet)
			}
			want := `msg="finding dismissed as already_correct: the code it flagged is gone" task=1 id=F001 file=a.txt line=`
			if n := strings.Count(h.log.String(), want); n != 1 || !strings.Contains(h.log.String(), `why="`+tc.why+`"`) {
				t.Fatalf("%d log lines naming the finding (want 1, why %q):\n%s", n, tc.why, h.log)
			}
		})
	}
	t.Run("a finding the fix left is not dismissed", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "## Task 1\nA\n")
		env := append(h.withStet(fakes.StetScenario{}), "PEAL_MAX_ADDRESS_ROUNDS=1")
		// The fix adds a line above the flagged one: the finding moves with
		// its hunk, which stet reviews again and reports again.
		h.scenario(map[string][]fakes.Outcome{"execute": {{WriteFiles: map[string]string{"a.txt": "first\n" + marker + "\n"}}},
			"address": {{WriteFiles: map[string]string{"a.txt": "first\nsecond\n" + marker + "\n"}}}})
		_, err := h.run(env...)
		if !review.IsFindingsRemaining(err) || strings.Contains(h.log.String(), "already_correct") {
			t.Fatalf("err %v\n%s", err, h.log)
		}
	})
}
