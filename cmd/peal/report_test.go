package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"golang.org/x/sys/unix"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
	"peal/report"
	"peal/state"
)

// reportCase is a recorded run: a plan, what the fake agent does, and the
// run's environment.
type reportCase struct {
	name  string
	plan  string
	rules map[string][]fakes.Outcome
	env   []string
	code  int
	// kill: SIGKILL peal while execute:2 runs.
	kill bool
	// stet: review with the fake stet.
	stet bool
	// root: the repository gets a first commit (a parallel block's
	// worktrees start from it).
	root bool
	// kind: the fake imitates this agent CLI (agent_kind), instead of
	// answering in plain text.
	kind string
}

// reportCheck fails while status.txt says broken, as a test suite would.
const reportCheck = `if grep -q broken status.txt 2>/dev/null; then echo "--- FAIL: TestStatus (status.txt is broken)"; exit 1; fi`

var reportCases = []reportCase{
	{name: "sequential", plan: plan3, rules: map[string][]fakes.Outcome{}, code: 0},
	{name: "parallel", plan: "## Task 1\nA\n## Task 2 (parallel)\nB\n## Task 3 (parallel)\nC\n",
		env: []string{"PEAL_PARALLEL=true"}, code: 0},
	{name: "retried", plan: plan3, rules: map[string][]fakes.Outcome{
		"execute:1": {{Exit: 1, Stderr: "agent broke"}, {}},
		"plan:2":    {{Stderr: "connect ECONNREFUSED: connection refused", Exit: 1}, {}},
		"execute:3": {{Hang: true}, {Exit: 1, Stderr: "agent broke again"}},
	}, env: []string{"PEAL_PHASE_RETRY_COUNT=1", "PEAL_NETWORK_RETRY_DELAY_SEC=1", "PEAL_IDLE_TIMEOUT_SEC=1",
		"PEAL_CONTINUE_WITH_REMAINING_TASKS=true"}, code: 2},
	{name: "killed", plan: plan3, rules: map[string][]fakes.Outcome{}, kill: true},
	// Task 2's review finds two problems; the first address round fixes
	// the error (F001), the second nothing: the warning is left, a Major.
	{name: "reviewed", plan: plan3, stet: true, rules: map[string][]fakes.Outcome{
		"execute:2": {{Plant: []fakes.Finding{
			{ID: "F001", File: "a.go", Severity: "error", Message: "nil map write"},
			{ID: "F002", File: "b.go", Severity: "warning", Message: "unchecked error"}}}},
		"address:2": {{StetFix: 1}, {}},
	}, env: []string{"PEAL_ON_FINDINGS_REMAINING=warn", "PEAL_MAX_ADDRESS_ROUNDS=2", "PEAL_STET_DISABLE_LLM_TRIAGE=true"}, code: 2},
	// Task 2's execute breaks the project's check; the address round,
	// shown the check's output, fixes it.
	{name: "checked", plan: plan3, rules: map[string][]fakes.Outcome{
		"execute:2": {{WriteFiles: map[string]string{"status.txt": "broken\n"}}},
		"address:2": {{WhenPrompt: &fakes.PromptWrites{Contains: "--- FAIL: TestStatus", WriteFiles: map[string]string{"status.txt": "fixed\n"}}}},
	}, env: []string{"PEAL_CHECK_COMMANDS=" + reportCheck + "\necho lint ok"}, code: 0},
	// Both tasks of a parallel block write shared.txt: task 2's merge
	// conflicts, its work is kept on a branch, and it runs again alone.
	{name: "merged", plan: "## Task 1 (parallel)\nA\n## Task 2 (parallel)\nB\n", root: true, rules: map[string][]fakes.Outcome{
		"execute:1": {{WriteFiles: map[string]string{"shared.txt": "one\n"}}},
		"execute:2": {{WriteFiles: map[string]string{"shared.txt": "two\n"}}},
	}, env: []string{"PEAL_PARALLEL=true"}, code: 0},
	// One conversation per task through Claude Code's stand-in: task 1's
	// plan and execute share a session; task 2's first plan attempt fails,
	// so its retry begins another session, which its execute and its
	// address round (the execute broke the check) continue. Each call
	// reports its tokens.
	{name: "sessions", plan: "## Task 1\nA\n## Task 2\nB\n", kind: "claude", rules: map[string][]fakes.Outcome{
		"plan:1":    {{InputTokens: 1200, CachedTokens: 0, OutputTokens: 80, CostUSD: 0.012}},
		"execute:1": {{InputTokens: 2600, CachedTokens: 1100, OutputTokens: 240, CostUSD: 0.021}},
		"plan:2":    {{EventError: "API Error: 500 Internal server error"}, {InputTokens: 1300, OutputTokens: 90, CostUSD: 0.013}},
		"execute:2": {{WriteFiles: map[string]string{"status.txt": "broken\n"}, InputTokens: 2900, CachedTokens: 1200, OutputTokens: 260, CostUSD: 0.024}},
		"address:2": {{WhenPrompt: &fakes.PromptWrites{Contains: "--- FAIL: TestStatus", WriteFiles: map[string]string{"status.txt": "fixed\n"}},
			InputTokens: 3700, CachedTokens: 2800, OutputTokens: 120, CostUSD: 0.011}},
	}, env: []string{"PEAL_AGENT_SESSION=task", "PEAL_PHASE_RETRY_COUNT=1", "PEAL_CHECK_COMMANDS=" + reportCheck}, code: 0},
}

// TestReportOfRecordedRuns runs peal with the fake agent (in sequence, in a
// parallel block, with retries of every class, killed), then `peal report`
// of the state it left: the report's calls are the calls the fake agent
// saw, in order, with their attempts and how each ended. With
// PEAL_REPORT_FIXTURES=DIR set it also writes each run's record and status
// there, paths replaced, for the golden files of package report.
func TestReportOfRecordedRuns(t *testing.T) {
	t.Parallel()
	for _, tc := range reportCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t, tc.plan)
			if tc.name == "parallel" {
				// Task 2's execute waits for what task 3's writes: they
				// overlap.
				gate := filepath.Join(s.agentDir, "gate")
				if err := syscall.Mkfifo(gate, 0o644); err != nil {
					t.Fatal(err)
				}
				tc.rules = map[string][]fakes.Outcome{"execute:2": {{WaitFile: gate}}, "execute:3": {{WriteFiles: map[string]string{gate: "go"}}}}
			}
			s.scenario(tc.rules)
			env := s.env(append([]string{"PEAL_AGENT_LOG_DIR=" + filepath.Join(s.dir, "logs")}, tc.env...)...)
			if tc.stet {
				stetDir := filepath.Join(s.dir, "stet")
				os.MkdirAll(stetDir, 0o755)
				fakes.WriteStetScenario(stetDir, fakes.StetScenario{})
				env = append(append(env, "FAKE_STET_DIR="+stetDir, "PEAL_STET_PATH="+bins["fakestet"]), testgit.Env...)
				s.git(env, "commit", "-q", "--allow-empty", "-m", "root")
			}
			if tc.root {
				env = append(env, testgit.Env...)
				s.git(env, "commit", "-q", "--allow-empty", "-m", "root")
			}
			if tc.kind != "" {
				env = append(env, "PEAL_AGENT_KIND="+tc.kind, "PEAL_AGENT_CMD="+cli(t, s.dir, tc.kind), "IS_SANDBOX=1")
			}
			if tc.kill {
				s.runKilled(env, "execute:2")
			} else if res := s.peal(env, "run"); res.code != tc.code {
				t.Fatalf("run: exit %d, want %d\n%s", res.code, tc.code, res.stderr)
			}
			res := s.peal(env, "report", "--format", "json")
			if res.code != 0 {
				t.Fatalf("report: exit %d\n%s", res.code, res.stderr)
			}
			var rep report.Report
			if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
				t.Fatalf("report json: %v\n%s", err, res.stdout)
			}
			s.checkCalls(rep, tc.kind == "")
			switch {
			case tc.kill:
				if rep.Run.State != report.RunCutOff || rep.Run.ExitCode != nil {
					t.Fatalf("run %+v, want cut off without an exit code", rep.Run)
				}
				if len(rep.Run.CutOff) != 1 {
					t.Fatalf("cut off %v, want one call", rep.Run.CutOff)
				}
				c := rep.Calls[slices.IndexFunc(rep.Calls, func(c report.Call) bool { return c.ID == rep.Run.CutOff[0] })]
				if c.Task != 2 || c.Phase != "execute" || c.Outcome != report.CallCutOff {
					t.Fatalf("cut-off call %+v, want task 2's execute", c)
				}
				if r := taskResult(t, rep, 2); r != "cut_off" {
					t.Fatalf("task 2 is %q, want cut_off", r)
				}
				// It ran until peal was killed, as the guard saw it die.
				events, _, _ := state.ReadRecord(filepath.Join(s.stateDir, state.RecordName))
				last := events[len(events)-1]
				if last.Ev != state.EvKilled || last.Time.Before(s.killedAt) || c.DurationMS != last.Time.Sub(c.Started).Milliseconds() {
					t.Fatalf("the record ends with %+v (killed after %s); the cut-off call ran %d ms from %s", last, s.killedAt, c.DurationMS, c.Started)
				}
				md := s.peal(env, "report").stdout
				if !strings.Contains(md, "Calls cut off when the run was killed:") || !strings.Contains(md, "task 2 execute, attempt 1") {
					t.Fatalf("markdown does not name the cut-off call:\n%s", md)
				}
			default:
				if rep.Run.State != report.RunFinished || rep.Run.ExitCode == nil || *rep.Run.ExitCode != tc.code {
					t.Fatalf("run %+v, want finished with exit %d", rep.Run, tc.code)
				}
			}
			if tc.name == "retried" {
				checkRetried(t, rep)
			}
			if tc.name == "parallel" {
				checkOverlap(t, rep, 2, 3)
			}
			if tc.name == "reviewed" {
				checkReviewed(t, rep)
			}
			if tc.name == "checked" {
				checkChecked(t, rep, s.peal(env, "report").stdout)
			}
			if tc.name == "merged" {
				checkMerged(t, rep, s.peal(env, "report").stdout)
			}
			if tc.name == "sessions" {
				checkSessions(t, rep, s.peal(env, "report").stdout)
			}
			if dir := os.Getenv("PEAL_REPORT_FIXTURES"); dir != "" {
				s.writeFixture(filepath.Join(dir, tc.name), env)
			}
		})
	}
}

// runKilled starts a run and SIGKILLs peal once the call key runs.
func (s *sandbox) runKilled(env []string, key string) {
	s.t.Helper()
	ready := filepath.Join(s.agentDir, "ready") // where a confined call may write
	if err := syscall.Mkfifo(ready, 0o644); err != nil {
		s.t.Fatal(err)
	}
	s.scenario(map[string][]fakes.Outcome{key: {{WriteFiles: map[string]string{ready: "x"}, Hang: true}}})
	cmd := exec.Command(bins["peal"], "run")
	cmd.Dir, cmd.Env = s.dir, env
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	if _, err := os.ReadFile(ready); err != nil { // blocks until the call runs
		s.t.Fatal(err)
	}
	// The run is killed once it has recorded the call's start: the call
	// may run a moment before peal hears it started.
	phase, task, _ := strings.Cut(key, ":")
	deadline := time.Now().Add(30 * time.Second)
	for !s.recorded(state.EvCallStart, phase, task) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			s.t.Fatalf("no start of %s in the run's record", key)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The guard notes the kill in the record as it sees peal die: the test
	// goes on once it has exited.
	guard, err := unix.PidfdOpen(guardOf(s.t, cmd.Process.Pid), 0)
	if err != nil {
		s.t.Fatal(err)
	}
	defer unix.Close(guard)
	s.killedAt = time.Now()
	cmd.Process.Kill()
	cmd.Wait()
	unix.Poll([]unix.PollFd{{Fd: int32(guard), Events: unix.POLLIN}}, 30_000)
	calls, _ := fakes.ReadCalls(s.agentDir)
	starts := fakes.Starts(calls)
	starts[len(starts)-1].ID().Kill() // the orphaned agent
}

// checkCalls: the report's agent calls are the fake agent's, in order, and
// each attempt number is the one the agent was given (PEAL_ATTEMPT); a
// prompt given as the last argument (promptArg) is hidden.
func (s *sandbox) checkCalls(rep report.Report, promptArg bool) {
	s.t.Helper()
	calls, err := fakes.ReadCalls(s.agentDir)
	if err != nil {
		s.t.Fatal(err)
	}
	var want, got []string
	for _, c := range fakes.Starts(calls) {
		if c.Phase == "" { // the authentication check is no call of the run
			continue
		}
		want = append(want, fmt.Sprintf("%s:%s#%s", c.Phase, c.Task, c.Env["PEAL_ATTEMPT"]))
	}
	for _, c := range rep.Calls {
		if c.Role == "" {
			continue // git and stet
		}
		got = append(got, fmt.Sprintf("%s:%d#%d", c.Phase, c.Task, c.Attempt))
		if len(c.Argv) == 0 || promptArg && !strings.HasSuffix(c.Argv[len(c.Argv)-1], ">") {
			s.t.Fatalf("call %s argv %q: want the prompt hidden", c.ID, c.Argv)
		}
		if c.Outcome != report.CallCutOff && len(c.LogHead) == 0 && c.Outcome != report.CallOK {
			s.t.Fatalf("call %s failed and shows no log lines: %+v", c.ID, c)
		}
	}
	slices.Sort(want) // parallel calls start in any order; each task's own order is checked below
	sorted := slices.Clone(got)
	slices.Sort(sorted)
	if !slices.Equal(sorted, want) {
		s.t.Fatalf("report calls\n%v\nwant the fake's\n%v", got, want)
	}
}

// checkRetried: every retry is in the report with its class.
func checkRetried(t *testing.T, rep report.Report) {
	t.Helper()
	byKey := map[string][]string{}
	for _, c := range rep.Calls {
		if c.Role != "" {
			k := fmt.Sprintf("%s:%d", c.Phase, c.Task)
			// A network retry waits network_retry_delay_sec ±20%.
			byKey[k] = append(byKey[k], fmt.Sprintf("%d:%s:%v:%v", c.Attempt, c.Outcome, c.Retried, c.WaitMS >= 800 && c.WaitMS <= 1200))
		}
	}
	want := map[string][]string{
		"execute:1": {"1:ordinary:true:false", "2:ok:false:false"},
		"plan:2":    {"1:network:true:true", "2:ok:false:false"},
		"execute:3": {"1:timeout:true:false", "2:ordinary:false:false"},
	}
	for k, w := range want {
		if !slices.Equal(byKey[k], w) {
			t.Errorf("%s attempts %v, want %v", k, byKey[k], w)
		}
	}
	// The first lines of a failed attempt's agent log are in the report.
	for _, c := range rep.Calls {
		if c.Task == 1 && c.Phase == "execute" && c.Attempt == 1 && !slices.Contains(c.LogHead, "stderr: agent broke") {
			t.Errorf("execute:1 attempt 1 log head %q, want the agent's stderr", c.LogHead)
		}
	}
	if r := taskResult(t, rep, 3); r != "failed" {
		t.Fatalf("task 3 is %q, want failed", r)
	}
	for _, task := range rep.Tasks {
		if task.Index == 3 && !slices.Equal(task.Phases[len(task.Phases)-1].Failures, []report.CallOutcome{"timeout", "ordinary"}) {
			t.Fatalf("task 3 phases %+v", task.Phases)
		}
	}
}

// checkOverlap: the execute calls of two tasks of a parallel block ran at
// the same time, and the timeline shows it.
func checkOverlap(t *testing.T, rep report.Report, a, b int) {
	t.Helper()
	span := func(task int) (time.Time, time.Time) {
		for _, c := range rep.Calls {
			if c.Task == task && c.Phase == "execute" && c.Ended != nil {
				return c.Started, *c.Ended
			}
		}
		t.Fatalf("no execute call of task %d", task)
		return time.Time{}, time.Time{}
	}
	as, ae := span(a)
	bs, be := span(b)
	if !as.Before(be) || !bs.Before(ae) {
		t.Fatalf("executes of tasks %d (%v–%v) and %d (%v–%v) do not overlap", a, as, ae, b, bs, be)
	}
}

// checkReviewed: task 2 had two address rounds and one Major finding
// left; its review and commits are calls of the record too.
func checkReviewed(t *testing.T, rep report.Report) {
	t.Helper()
	for _, task := range rep.Tasks {
		if task.Index != 2 {
			continue
		}
		if task.Result != "findings_left" || task.ReviewRounds != 2 || task.Findings == nil || task.Findings.Critical != 0 || task.Findings.Major != 1 {
			t.Fatalf("task 2 %+v (findings %+v), want findings left after 2 rounds: 1 Major", task, *task.Findings)
		}
	}
	var commits, reviews int
	for _, c := range rep.Calls {
		if c.Phase == "git" && slices.Contains(c.Argv, "commit") {
			commits++
		}
		if c.Phase == "stet" && slices.Contains(c.Argv, "run") {
			reviews++
		}
	}
	// Only task 2's execute and its first address round change files:
	// two commits; the other tasks and round leave nothing to commit.
	if commits != 2 || reviews == 0 {
		t.Fatalf("%d commits and %d stet runs in the record", commits, reviews)
	}
}

// checkChecked: every run of the checks is in the report, task 2's failed
// after its execute and passed after its round, and the Markdown says so.
func checkChecked(t *testing.T, rep report.Report, md string) {
	t.Helper()
	var runs []string
	for _, c := range rep.Checks {
		runs = append(runs, fmt.Sprintf("%d %s%d %s", c.Task, c.Stage, c.Round, c.Outcome))
	}
	want := []string{"-1 start0 passed", "-1 start0 passed", "1 execute0 passed", "1 execute0 passed", "2 execute0 failed", "2 execute0 passed",
		"2 address1 passed", "2 address1 passed", "3 execute0 passed", "3 execute0 passed"}
	if !slices.Equal(runs, want) {
		t.Fatalf("check runs %q\nwant %q", runs, want)
	}
	for _, task := range rep.Tasks {
		if task.Index == 2 && (len(task.Checks) != 2 || !slices.Equal(task.Checks[0].Failed, []string{reportCheck}) || len(task.Checks[1].Failed) != 0) {
			t.Fatalf("task 2's checks %+v", task.Checks)
		}
		for _, p := range task.Phases {
			if p.Name == "check" {
				t.Fatalf("task %d counts its checks as a phase: %+v", task.Index, task.Phases)
			}
		}
	}
	for _, line := range []string{
		"| 2 | completed | plan 1, execute 1, address 1 | 1 | – | execute failed, round 1 passed |",
		"…\\` failed (exit 1: --- FAIL: TestStatus (status.txt is broken)) after execute, passed after round 1\n- task 2: \\`echo lint ok\\` passed after execute, passed after round 1\n",
		"Checks: 10 runs, 1 did not pass.",
	} {
		if !strings.Contains(md, line) {
			t.Fatalf("markdown lacks %q:\n%s", line, md)
		}
	}
}

// checkMerged: the merge that conflicted, the branch that keeps its work
// and the task's second run are in the report.
func checkMerged(t *testing.T, rep report.Report, md string) {
	t.Helper()
	if len(rep.Merges) != 2 || rep.Merges[0].Result != report.MergeMerged || rep.Merges[1].Result != report.MergeConflict ||
		!slices.Equal(rep.Merges[1].Files, []string{"shared.txt"}) || !strings.HasPrefix(rep.Merges[1].Kept, "peal-kept/task-2-") || !rep.Merges[1].RanAgain {
		t.Fatalf("merges %+v", rep.Merges)
	}
	for _, line := range []string{
		"| 2 | completed | plan 2, execute 2 | 0 (no review) | – | conflict in shared.txt, undone, work kept on " + strings.ReplaceAll(rep.Merges[1].Kept, "_", "\\_") + ", ran again alone |",
		"Merges: 1 merged, 1 conflict.",
		"| planaruoa-2 | 2 |",
	} {
		if !strings.Contains(md, line) {
			t.Fatalf("markdown lacks %q:\n%s", line, md)
		}
	}
}

// checkSessions: each agent call of the report says whether it began or
// continued its task's session, and what it reported; a task's calls
// continue the session its plan began, another task's is another, and the
// retry of a plan call that failed began a session of its own.
func checkSessions(t *testing.T, rep report.Report, md string) {
	t.Helper()
	var got []string
	ids := map[string]string{}
	for _, c := range rep.Calls {
		if c.Role == "" {
			continue
		}
		key := fmt.Sprintf("%d", c.Task)
		if c.Session == "began" {
			ids[key] = c.SessionID
		}
		if c.SessionID != ids[key] || c.SessionID == "" {
			t.Fatalf("call %s:%d#%d names the session %q, want the task's %q", c.Phase, c.Task, c.Attempt, c.SessionID, ids[key])
		}
		in, cached, out := int64(0), int64(0), int64(0)
		if c.Usage != nil {
			in, cached, out = c.Usage.InputTokens, c.Usage.CachedTokens, c.Usage.OutputTokens
		}
		got = append(got, fmt.Sprintf("%s:%d#%d %s %d/%d/%d", c.Phase, c.Task, c.Attempt, c.Session, in, cached, out))
	}
	want := []string{"plan:1#1 began 1200/0/80", "execute:1#1 continued 2600/1100/240", "plan:2#1 began 0/0/0", "plan:2#2 began 1300/0/90",
		"execute:2#1 continued 2900/1200/260", "address:2#1 continued 3700/2800/120"}
	if !slices.Equal(got, want) {
		t.Fatalf("calls\n%q\nwant\n%q", got, want)
	}
	if ids["1"] == ids["2"] {
		t.Fatalf("tasks 1 and 2 share the session %s", ids["1"])
	}
	if rep.Usage == nil || rep.Usage.InputTokens != 11700 || rep.Usage.CachedTokens != 5100 || rep.Usage.OutputTokens != 790 {
		t.Fatalf("usage %+v", rep.Usage)
	}
	for _, line := range []string{
		"Usage: 11700 input tokens (5100 cached), 790 output tokens, $0.0810.",
		"- task 2 address, attempt 1 (primary): continued session " + ids["2"] + "; 3700 input tokens (2800 cached), 120 output tokens, $0.0110\n",
	} {
		if !strings.Contains(md, line) {
			t.Fatalf("markdown lacks %q:\n%s", line, md)
		}
	}
}

func taskResult(t *testing.T, rep report.Report, i int) string {
	t.Helper()
	for _, task := range rep.Tasks {
		if task.Index == i {
			return task.Result
		}
	}
	t.Fatalf("no task %d in the report", i)
	return ""
}

// writeFixture keeps a run's record and status, with the sandbox's paths
// replaced, as a fixture of package report.
func (s *sandbox) writeFixture(dir string, env []string) {
	s.t.Helper()
	status := s.peal(env, "status", "--json").stdout
	record, err := os.ReadFile(filepath.Join(s.stateDir, "run_record.jsonl"))
	if err != nil {
		s.t.Fatal(err)
	}
	scrub := func(b []byte) []byte {
		b = bytes.ReplaceAll(b, []byte(bins["fakeagent"]), []byte("/usr/local/bin/agent"))
		return bytes.ReplaceAll(b, []byte(s.dir), []byte("/work"))
	}
	os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, "run_record.jsonl"), scrub(record), 0o644); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "status.json"), scrub([]byte(status)), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// TestReportOutputs: --output writes the file; in CI (CI=true) the Markdown
// summary is appended to $GITHUB_STEP_SUMMARY unless report_step_summary is
// false, and outside CI only when it is true.
func TestReportOutputs(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, plan3)
	s.scenario(map[string][]fakes.Outcome{})
	env := s.env()
	if r := s.peal(env, "run"); r.code != 0 {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	html := filepath.Join(s.dir, "out", "report.html")
	os.MkdirAll(filepath.Dir(html), 0o755)
	cases := []struct {
		name    string
		env     []string
		summary bool
	}{
		{"CI", []string{"CI=true"}, true},
		{"CI, turned off", []string{"CI=true", "PEAL_REPORT_STEP_SUMMARY=false"}, false},
		{"not CI", nil, false},
		{"not CI, turned on", []string{"PEAL_REPORT_STEP_SUMMARY=true"}, true},
	}
	for _, tc := range cases {
		summary := filepath.Join(s.dir, strings.ReplaceAll(tc.name, " ", "_")+".md")
		os.WriteFile(summary, []byte("earlier step\n"), 0o644)
		r := s.peal(append(append(slices.Clone(env), tc.env...), "GITHUB_STEP_SUMMARY="+summary), "report", "--format", "html", "--output", html)
		if r.code != 0 || r.stdout != "" {
			t.Fatalf("%s: exit %d, stdout %q, stderr %s", tc.name, r.code, r.stdout, r.stderr)
		}
		data, _ := os.ReadFile(summary)
		got := string(data)
		if !strings.HasPrefix(got, "earlier step\n") {
			t.Fatalf("%s: the job summary lost what was there: %q", tc.name, got)
		}
		if has := strings.Contains(got, "| 3 | completed |"); has != tc.summary {
			t.Fatalf("%s: job summary written %v, want %v:\n%s", tc.name, has, tc.summary, got)
		}
		page, err := os.ReadFile(html)
		if err != nil || !bytes.HasPrefix(page, []byte("<!DOCTYPE html>")) {
			t.Fatalf("%s: html %v %.100s", tc.name, err, page)
		}
	}
	// The summary of `--format markdown` is what it printed.
	summary := filepath.Join(s.dir, "markdown.md")
	if r := s.peal(append(slices.Clone(env), "CI=true", "GITHUB_STEP_SUMMARY="+summary), "report"); r.code != 0 || !strings.Contains(r.stdout, "| 3 | completed |") {
		t.Fatalf("markdown: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	} else if data, _ := os.ReadFile(summary); string(data) != r.stdout+"\n" {
		t.Fatalf("job summary %q, want what was printed %q", data, r.stdout)
	}
	// No agent CLI is needed: only files are read.
	if r := s.peal(append(without(slices.Clone(env), "PEAL_AGENT_CMD"), "PEAL_AGENT_CMD=/nonexistent/agent"), "report"); r.code != 0 || !strings.Contains(r.stdout, "| 1 | completed |") {
		t.Fatalf("report without the agent: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := s.peal(env, "report", "--format", "pdf"); r.code != 1 || !strings.Contains(r.stderr, "--format") {
		t.Fatalf("a bad format: exit %d, %s", r.code, r.stderr)
	}
}

// recorded reports whether the run record holds an event of kind ev for
// the phase and task named.
func (s *sandbox) recorded(ev, phase, task string) bool {
	events, _, _ := state.ReadRecord(filepath.Join(s.stateDir, state.RecordName))
	for _, e := range events {
		if e.Ev == ev && string(e.Phase) == phase && e.Task != nil && strconv.Itoa(*e.Task) == task {
			return true
		}
	}
	return false
}
