package review_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"peal/confine"
	"peal/internal/gitrepo"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testbin"
)

// TestRealStet runs peal end to end with the real stet CLI named by
// PEAL_STET_BIN (skipped without it), the fake agent, and a fake
// OpenAI-compatible model server on 127.0.0.1 that reports a finding for
// every line of a reviewed hunk that holds a planted finding marker.
func TestRealStet(t *testing.T) {
	stetBin := os.Getenv("PEAL_STET_BIN")
	if stetBin == "" {
		t.Skip("PEAL_STET_BIN does not name a stet binary")
	}
	t.Parallel()
	bins, err := testbin.Build(t.TempDir(), "peal/cmd/peal", "peal/testdata/fakeagent")
	if err != nil {
		t.Fatal(err)
	}
	noteA := fakes.Finding{ID: "F001", File: "notes/a.txt", Severity: "error", Message: "the total is never checked"}
	noteB := fakes.Finding{ID: "F002", File: "notes/b.txt", Severity: "warning", Message: "the name is misspelt"}

	t.Run("defaults, fixed in an address round, a second run", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, bins, stetBin, "## Task 1\nWrite the notes\n")
		e.scenario(map[string][]fakes.Outcome{"execute": {{Plant: []fakes.Finding{noteA, noteB}}}, "address": {{StetFix: -1}}})
		r := e.peal()
		e.want(r, 0)
		if got := e.keys(); got != "plan:1 execute:1 triage:1 address:1" {
			t.Fatalf("agent calls %q", got)
		}
		e.clean()
		if got := e.commits(); !slices.Equal(got, []string{"root", "peal: task 1 - fake plan output for task 1", "peal: task 1 - address round 1"}) {
			t.Fatalf("commits %q", got)
		}
		if n := e.model.reviews(); n != 4 {
			t.Fatalf("the model reviewed %d hunks, want 4 (two, then the two fixed ones)", n)
		}
		// A second run on the same repository starts; a new task runs in it.
		e.want(e.peal(), 0)
		os.WriteFile(e.plan, []byte("## Task 1\nWrite the notes\n## Task 2\nMore\n"), 0o644)
		e.scenario(map[string][]fakes.Outcome{"execute:2": {{WriteFiles: map[string]string{"notes/c.txt": "fine\n"}}}})
		e.want(e.peal(), 0)
		if got := e.keys(); got != "plan:2 execute:2" {
			t.Fatalf("third run's agent calls %q", got)
		}
		e.clean()
	})

	t.Run("two tasks, findings left by task 1", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, bins, stetBin, "## Task 1\nA\n## Task 2\nB\n")
		e.scenario(map[string][]fakes.Outcome{"execute:1": {{Plant: []fakes.Finding{noteA}}},
			"execute:2": {{WriteFiles: map[string]string{"notes/c.txt": "fine\n"}}}})
		r := e.peal("PEAL_MAX_ADDRESS_ROUNDS=1", "PEAL_ON_FINDINGS_REMAINING=warn")
		e.want(r, 2)
		if got := e.keys(); got != "plan:1 execute:1 triage:1 address:1 plan:2 execute:2" {
			t.Fatalf("agent calls %q: task 2 was charged with task 1's finding", got)
		}
		var sum struct {
			Completed    []int `json:"tasks_completed"`
			WithFindings []int `json:"tasks_with_remaining_findings"`
		}
		data, _ := os.ReadFile(filepath.Join(e.state, "run_summary.json"))
		if json.Unmarshal(data, &sum) != nil || !slices.Equal(sum.Completed, []int{2}) || !slices.Equal(sum.WithFindings, []int{1}) {
			t.Fatalf("summary %s", data)
		}
		e.clean()
	})

	t.Run("a run after SIGKILL", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, bins, stetBin, "## Task 1\nWrite the notes\n")
		ready := filepath.Join(e.agentDir, "ready") // where the confined agent may write
		if err := syscall.Mkfifo(ready, 0o600); err != nil {
			t.Fatal(err)
		}
		// The first execute plants and then hangs: peal is killed while the
		// task's review session is open and the tree holds its changes.
		e.scenario(map[string][]fakes.Outcome{
			"execute": {{Plant: []fakes.Finding{noteA}, WriteFiles: map[string]string{ready: "x"}, Hang: true}, {Plant: []fakes.Finding{noteA}}},
			"address": {{StetFix: -1}},
		})
		cmd := e.pealCmd()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.ReadFile(ready); err != nil {
			t.Fatal(err)
		}
		cmd.Process.Kill()
		cmd.Wait()
		for _, c := range e.calls() {
			syscall.Kill(-c.PID, syscall.SIGKILL) // the agent peal could not stop
		}
		if out, _ := e.stet("status"); !strings.Contains(out, "baseline:") {
			t.Fatalf("no session was left open by the killed run: %s", out)
		}
		r := e.peal()
		e.want(r, 0)
		if !strings.Contains(r.stderr, "a review session was left open") {
			t.Fatalf("the stale session was not cleared:\n%s", r.stderr)
		}
		if got := e.keys(); got != "plan:1 execute:1 plan:1 execute:1 triage:1 address:1" {
			t.Fatalf("agent calls %q", got)
		}
		e.clean()
	})

	t.Run("a run after SIGKILL during the review", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, bins, stetBin, "## Task 1\nWrite the notes\n")
		e.scenario(map[string][]fakes.Outcome{"execute": {{Plant: []fakes.Finding{noteA, noteB}}}, "address": {{StetFix: -1}}})
		held, release := e.model.holdFirst()
		cmd := e.pealCmd()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		<-held
		// The machine goes down: peal and the review it runs die at once.
		children := childrenOf(t, cmd.Process.Pid)
		cmd.Process.Kill()
		for _, pid := range children {
			syscall.Kill(-pid, syscall.SIGKILL)
		}
		cmd.Wait()
		release()
		// The task's commit is in the work tree, or, confined, on the
		// branch of the run's worktree.
		if got := strings.Split(e.git("log", "--branches", "--reverse", "--format=%s"), "\n"); len(got) != 2 {
			t.Fatalf("commits before the crash %q", got)
		}
		r := e.peal()
		e.want(r, 0)
		// The cut-off task's work is kept on a branch of its own, never on
		// the user's, and the task runs again from where the user was.
		for _, want := range []string{"a review session was left open", "task 1's work is kept on branch peal-kept/task-1-"} {
			if !strings.Contains(r.stderr, want) {
				t.Fatalf("the second run's log lacks %q:\n%s", want, r.stderr)
			}
		}
		// The second run did the task again, reviewed it and fixed it.
		if got := e.keys(); got != "plan:1 execute:1 plan:1 execute:1 triage:1 address:1" {
			t.Fatalf("agent calls %q", got)
		}
		e.clean()
	})

	t.Run("a parallel block, each task in its worktree", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, bins, stetBin, "## Task 1 (parallel)\nA\n## Task 2 (parallel)\nB\n## Task 3 (parallel)\nC\n")
		// Tasks 1 and 3 plant a finding each, fixed in an address round;
		// their reviews and task 2's run at the same time, each in its
		// task's worktree with stet's state in the task's own folder.
		e.scenario(map[string][]fakes.Outcome{
			"execute:1": {{Plant: []fakes.Finding{noteA}}},
			"execute:2": {{WriteFiles: map[string]string{"notes/c.txt": "fine\n"}}},
			"execute:3": {{Plant: []fakes.Finding{noteB}}},
			"address":   {{StetFix: -1}},
		})
		e.model.delay = 300 * time.Millisecond // reviews long enough to overlap
		// stet behind a wrapper that notes when each command of each task
		// starts and ends, and in which state folder.
		calls := filepath.Join(e.dir, "stet-calls")
		os.Remove(filepath.Join(e.binDir, "stet"))
		if err := os.WriteFile(filepath.Join(e.binDir, "stet"), []byte(fakes.StetRecorder(stetBin, calls)), 0o755); err != nil {
			t.Fatal(err)
		}
		r := e.peal("PEAL_MAX_PARALLEL=3")
		e.want(r, 0)
		keys := strings.Fields(e.keys())
		slices.Sort(keys)
		if got := strings.Join(keys, " "); got != "address:1 address:3 execute:1 execute:2 execute:3 plan:1 plan:2 plan:3 triage:1 triage:3" {
			t.Fatalf("agent calls %q: each task's findings are its own", got)
		}
		e.clean()
		if got := e.git("log", "--first-parent", "--reverse", "--format=%s"); !strings.HasSuffix(got, "/task-3)") || strings.Count(got, "peal: merge task") != 3 {
			t.Fatalf("history along the work tree's branch:\n%s", got)
		}
		if got := e.git("log", "--no-merges", "--format=%s"); strings.Count(got, "address round 1") != 2 {
			t.Fatalf("commits:\n%s", got)
		}
		// Every stet command of a task ran in its worktree with its own state
		// folder; count how many ran at the same time as another task's.
		spans, err := fakes.ReadStetSpans(calls)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range spans {
			wt := filepath.Join(e.state, "worktrees", "task-"+sp.Task)
			if sp.State != filepath.Join(wt+".review", "stet") || sp.Dir != wt {
				t.Errorf("stet %s of task %s ran with state %s in %s", sp.Cmd, sp.Task, sp.State, sp.Dir)
			}
		}
		overlaps := fakes.OverlappingPairs(spans)
		t.Logf("%d stet commands of the tasks; overlapping pairs of different tasks' commands: %v", len(spans), overlaps)
		if len(overlaps) == 0 {
			t.Fatalf("no two tasks' stet commands overlapped: the test proves nothing about collisions")
		}
		if entries, _ := os.ReadDir(filepath.Join(e.state, "worktrees")); len(entries) != 0 {
			t.Fatalf("the worktrees folder keeps %d entries", len(entries))
		}
	})

	t.Run("the model unreachable", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, bins, stetBin, "## Task 1\nA\n## Task 2\nB\n")
		e.model.close()
		e.scenario(map[string][]fakes.Outcome{"execute": {{Plant: []fakes.Finding{noteA}}}})
		r := e.peal("PEAL_NETWORK_RETRY_COUNT=1", "PEAL_NETWORK_RETRY_DELAY_SEC=0", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true")
		e.want(r, 4)
		last := lastLine(r.stderr)
		t.Logf("peal's last line: %s", last)
		if !strings.Contains(last, "the review model looks unreachable: stet run exited 2 on 2 attempts; stet says: OpenAI-compat server") ||
			!strings.Contains(last, "unreachable at "+e.model.base) {
			t.Fatalf("last line %q", last)
		}
		if got := e.keys(); got != "plan:1 execute:1" {
			t.Fatalf("agent calls %q: an unreachable model must not lead to triage, address or the next task", got)
		}
	})

	// A model the server does not know: stet exits 2, as for an
	// unreachable one, but says "LLM bad request": no retry can help, so
	// the run stops at once with exit 1, naming stet's settings.
	t.Run("the model unknown to the server", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, bins, stetBin, "## Task 1\nA\n## Task 2\nB\n")
		e.scenario(map[string][]fakes.Outcome{"execute": {{Plant: []fakes.Finding{noteA}}}})
		start := time.Now()
		r := e.peal("STET_MODEL=wrong-model", "PEAL_NETWORK_RETRY_COUNT=2", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true")
		e.want(r, 1)
		last := lastLine(r.stderr)
		t.Logf("peal's last line, after %s: %s", time.Since(start).Round(100*time.Millisecond), last)
		if !strings.Contains(last, "stet says: LLM bad request at "+e.model.base+".") || !strings.Contains(last, "STET_MODEL") ||
			strings.Contains(last, "unreachable") {
			t.Fatalf("last line %q", last)
		}
		if got := e.keys(); got != "plan:1 execute:1" {
			t.Fatalf("agent calls %q: a refused review must not lead to triage, address or the next task", got)
		}
		if n := strings.Count(r.stderr, "call failed, retrying"); n != 0 {
			t.Fatalf("the review was retried %d times:\n%s", n, r.stderr)
		}
	})

	// A fix by deletion: stet resolves a finding only when a hunk it
	// reviews again covers the finding's line; here none does, and the
	// finding would stay active after the fix.
	for _, tc := range []struct {
		name    string
		before  map[string]string // committed before the run
		execute fakes.Outcome
		fix     fakes.Outcome
		why     string
	}{
		{"the flagged line was the file's last", nil,
			fakes.Outcome{WriteFiles: map[string]string{"notes/a.txt": "first line\n" + fakes.MarkerLine(noteA) + "\n"}},
			fakes.Outcome{WriteFiles: map[string]string{"notes/a.txt": "first line\n"}}, "its line is past the end of the file"},
		{"the file is removed", nil,
			fakes.Outcome{WriteFiles: map[string]string{"notes/a.txt": "first line\n" + fakes.MarkerLine(noteA) + "\nlast line\n"}},
			fakes.Outcome{RemoveFiles: []string{"notes/a.txt"}}, "its file is gone"},
		{"the fix undid the change", map[string]string{"notes/a.txt": "1\n2\n3\n4\n5\n6\n7\n8\n9\n"},
			fakes.Outcome{WriteFiles: map[string]string{"notes/a.txt": "1\n2\n3\n4\n" + fakes.MarkerLine(noteA) + "\n5\n6\n7\n8\n9\n"}},
			fakes.Outcome{WriteFiles: map[string]string{"notes/a.txt": "1\n2\n3\n4\n5\n6\n7\n8\n9\n"}}, "no change of the task covers its line any more"},
	} {
		t.Run("a fix by deletion: "+tc.name, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t, bins, stetBin, "## Task 1\nWrite the notes\n")
			if len(tc.before) > 0 {
				for name, content := range tc.before {
					os.MkdirAll(filepath.Dir(filepath.Join(e.repo, name)), 0o755)
					os.WriteFile(filepath.Join(e.repo, name), []byte(content), 0o644)
				}
				e.git("add", "-A")
				e.git("commit", "-q", "-m", "before")
			}
			e.scenario(map[string][]fakes.Outcome{"execute": {tc.execute}, "address": {tc.fix}})
			r := e.peal("PEAL_MAX_ADDRESS_ROUNDS=2")
			e.want(r, 0)
			if got := e.keys(); got != "plan:1 execute:1 triage:1 address:1" {
				t.Fatalf("agent calls %q", got)
			}
			want := `msg="finding dismissed as already_correct: the code it flagged is gone" task=1 id=`
			if !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "file=notes/a.txt") || !strings.Contains(r.stderr, tc.why) {
				t.Fatalf("no log line naming the dismissed finding and why (%q):\n%s", tc.why, r.stderr)
			}
			for _, line := range strings.Split(r.stderr, "\n") {
				if strings.Contains(line, "dismissed as already_correct") {
					t.Log(line)
				}
			}
			e.clean()
		})
	}

	t.Run("--stream in stet_run_extra_args", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, bins, stetBin, "## Task 1\nWrite the notes\n")
		e.scenario(map[string][]fakes.Outcome{"execute": {{WriteFiles: map[string]string{"notes/c.txt": "fine\n"}}}})
		r := e.peal("PEAL_STET_RUN_EXTRA_ARGS=--stream")
		e.want(r, 0)
		if got := e.keys(); got != "plan:1 execute:1" {
			t.Fatalf("agent calls %q: stet's events were taken for a finding", got)
		}
		if !strings.Contains(r.stderr, "dropped=--stream") {
			t.Fatalf("no warning about the dropped argument:\n%s", r.stderr)
		}
		e.clean()
	})

	t.Run("the user's settings in the work tree's .review/config.toml", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, bins, stetBin, "## Task 1\nWrite the notes\n")
		// No STET_* variable: the settings are the user's file, which git
		// ignores, and which the run's worktree does not hold.
		e.env = slices.DeleteFunc(e.env, func(kv string) bool { return strings.HasPrefix(kv, "STET_") })
		os.WriteFile(filepath.Join(e.repo, ".gitignore"), []byte(".review/\n"), 0o644)
		e.git("add", ".gitignore")
		e.git("commit", "-q", "-m", "ignore")
		os.MkdirAll(filepath.Join(e.repo, ".review"), 0o755)
		os.WriteFile(filepath.Join(e.repo, ".review", "config.toml"), []byte("provider = \"openai\"\nopenai_base_url = \""+e.model.base+"\"\nmodel = \"fake-model\"\n"), 0o644)
		e.scenario(map[string][]fakes.Outcome{"execute": {{Plant: []fakes.Finding{noteA}}}, "address": {{StetFix: -1}}})
		e.want(e.peal(), 0)
		if n := e.model.reviews(); n == 0 {
			t.Fatal("stet did not review with the user's settings")
		}
	})

	t.Run("review settings a call planted in its tree", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, bins, stetBin, "## Task 1\nWrite the notes\n")
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		var got sync.WaitGroup
		accepted := 0
		got.Add(1)
		go func() {
			defer got.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				accepted++
				c.Close()
			}
		}()
		settings := "provider = \"openai\"\nopenai_base_url = \"http://" + ln.Addr().String() + "/v1\"\n"
		e.scenario(map[string][]fakes.Outcome{"execute": {{Plant: []fakes.Finding{noteA}, WriteFiles: map[string]string{".review/config.toml": settings}}}})
		r := e.peal()
		e.want(r, 1)
		if last := r.stderr[strings.LastIndex(strings.TrimSpace(r.stderr), "\n")+1:]; !strings.Contains(last, "config.toml was made in the task's tree") {
			t.Fatalf("last line %q", last)
		}
		ln.Close()
		got.Wait()
		if accepted != 0 || e.model.reviews() != 0 {
			t.Fatalf("stet reviewed with the planted settings: the listener accepted %d, the model reviewed %d", accepted, e.model.reviews())
		}
	})

	t.Run("a slow review under an idle timeout, streamed", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, bins, stetBin, "## Task 1\nWrite the notes\n")
		e.model.delay = 2 * time.Second
		e.scenario(map[string][]fakes.Outcome{"execute": {{Plant: []fakes.Finding{noteA, noteB}}}, "address": {{StetFix: -1}}})
		r := e.peal("PEAL_IDLE_TIMEOUT_SEC=1", "PEAL_LOG_LEVEL=debug")
		e.want(r, 0)
		if !strings.Contains(r.stderr, `msg="review progress" task=1 msg="Reviewing hunk 2/2: notes/b.txt"`) {
			t.Fatalf("no streamed progress in the log:\n%s", r.stderr)
		}
		e.clean()
	})
}

// e2e is one scratch repository, plan, state folder, fake agent and model
// server for peal runs with the real stet.
type e2e struct {
	t                                        *testing.T
	bins                                     map[string]string
	dir, repo, plan, state, agentDir, binDir string
	model                                    *modelServer
	env                                      []string
}

func newE2E(t *testing.T, bins map[string]string, stetBin, plan string) *e2e {
	t.Helper()
	dir := testbin.ListSafeDir(t) // listed in PEAL_CONFINE_WRITE_PATHS
	e := &e2e{t: t, bins: bins, dir: dir, repo: filepath.Join(dir, "repo"), plan: filepath.Join(dir, "plan.md"),
		state: filepath.Join(dir, "state"), agentDir: filepath.Join(dir, "agent"), binDir: filepath.Join(dir, "bin")}
	for _, d := range []string{e.repo, e.agentDir, e.binDir} {
		os.MkdirAll(d, 0o755)
	}
	// stet is found on PATH, as with the defaults.
	if err := os.Symlink(stetBin, filepath.Join(e.binDir, "stet")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(e.plan, []byte(plan), 0o644)
	// stet runs git with HOME and PATH only: the identity for its notes
	// comes from the user's git configuration.
	os.WriteFile(filepath.Join(dir, ".gitconfig"), []byte("[user]\n\tname = t\n\temail = t@example.com\n"), 0o644)
	e.model = newModelServer(t)
	e.env = []string{"PATH=" + e.binDir + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + dir,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		"STET_PROVIDER=openai", "STET_OPENAI_BASE_URL=" + e.model.base, "STET_MODEL=fake-model",
		fakes.AgentDirEnv + "=" + e.agentDir,
		// Confined as by default: the stand-in agent keeps its variables
		// and writes its records outside its task's work tree.
		"PEAL_CONFINE_ENV_PASS=FAKE_*", "PEAL_CONFINE_WRITE_PATHS=" + e.agentDir,
		"PEAL_PLAN_PATH=" + e.plan, "PEAL_REPO_PATH=" + e.repo, "PEAL_STATE_DIR=" + e.state,
		"PEAL_AGENT_CMD=" + bins["fakeagent"], "PEAL_PHASE_TIMEOUT_SEC=120", "PEAL_KILL_GRACE_SEC=1",
		// The Cursor kind (the default) checks for a credential before its
		// first call; a key in the environment is one.
		"CURSOR_API_KEY=test-key"}
	e.git("init", "-q")
	e.git("commit", "-q", "--allow-empty", "-m", "root")
	return e
}

func (e *e2e) git(args ...string) string {
	e.t.Helper()
	out, err := gitrepo.Plain(e.repo, e.env...).Command(args...).Run(context.Background())
	if err != nil {
		e.t.Fatalf("%v", err)
	}
	return strings.TrimSpace(out)
}

// stet runs the real stet where the run's tasks are reviewed, with peal's
// folders for it: the repository, or, where the kernel confines files
// (confine = auto), the run's worktree and its review folder.
func (e *e2e) stet(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(e.binDir, "stet"), args...)
	cmd.Dir, cmd.Env = e.repo, append(e.env, "STET_STATE_DIR="+filepath.Join(e.state, "review", "stet"), "STET_WORKTREE_ROOT="+filepath.Join(e.state, "review", "worktrees"))
	if confine.Probe().Files {
		// The run's worktree keeps the run's review folder (Moved).
		cmd.Dir = filepath.Join(e.state, "worktrees", "home")
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (e *e2e) scenario(rules map[string][]fakes.Outcome) {
	e.t.Helper()
	if err := fakes.WriteScenario(e.agentDir, fakes.Scenario{Rules: rules}); err != nil {
		e.t.Fatal(err)
	}
	os.Remove(filepath.Join(e.agentDir, fakes.CallsFile))
}

func (e *e2e) calls() []fakes.Call {
	e.t.Helper()
	c, err := fakes.ReadCalls(e.agentDir)
	if err != nil {
		e.t.Fatal(err)
	}
	return fakes.Starts(c)
}

func (e *e2e) keys() string { return strings.Join(fakes.Keys(e.calls()), " ") }

type e2eResult struct {
	code           int
	stdout, stderr string
}

func (e *e2e) pealCmd(env ...string) *exec.Cmd {
	cmd := exec.Command(e.bins["peal"], "run")
	cmd.Dir = e.dir
	cmd.Env = append(append([]string{}, e.env...), env...)
	return cmd
}

func (e *e2e) peal(env ...string) e2eResult {
	e.t.Helper()
	cmd := e.pealCmd(env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		e.t.Fatal(err)
	}
	return e2eResult{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

func (e *e2e) want(r e2eResult, code int) {
	e.t.Helper()
	if r.code != code {
		e.t.Fatalf("peal exited %d, want %d\n%s", r.code, code, r.stderr)
	}
}

// clean checks that the run left nothing of peal or stet in the user's tree
// or history, and no review session open.
func (e *e2e) clean() {
	e.t.Helper()
	if got := e.git("status", "--porcelain", "--ignored"); got != "" {
		e.t.Fatalf("git status after the run: %q", got)
	}
	if files := e.git("log", "--name-only", "--format="); strings.Contains(files, ".review") || strings.Contains(files, ".peal") {
		e.t.Fatalf("stet or peal files were committed:\n%s", files)
	}
	if out, err := e.stet("status"); err == nil {
		e.t.Fatalf("a review session is still open:\n%s", out)
	}
	// The run's worktree (confined runs) outlives the run; nothing else.
	left, _ := os.ReadDir(filepath.Join(e.state, "worktrees"))
	left = slices.DeleteFunc(left, func(d os.DirEntry) bool { return strings.HasPrefix(d.Name(), "home") })
	if len(left) > 0 {
		e.t.Fatalf("worktrees left: %v", left)
	}
	if wts := e.git("worktree", "list"); strings.Count(wts, "\n") != strings.Count(wts, "/worktrees/home ") {
		e.t.Fatalf("worktrees left:\n%s", wts)
	}
}

func (e *e2e) commits() []string {
	return strings.Split(e.git("log", "--reverse", "--format=%s"), "\n")
}

// childrenOf lists the child processes of pid (Linux).
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var pids []int
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, field := range strings.Fields(string(data)) {
			if n, err := strconv.Atoi(field); err == nil {
				pids = append(pids, n)
			}
		}
	}
	if len(pids) == 0 {
		t.Skip("the children of a process cannot be listed here")
	}
	return pids
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// modelServer is a fake OpenAI-compatible server: /v1/models lists one
// model; /v1/chat/completions answers each hunk review with a JSON array
// holding one finding per added line with a planted finding marker.
type modelServer struct {
	srv   *httptest.Server
	base  string
	delay time.Duration
	mu    sync.Mutex
	hunks int
	// hold, when set, keeps the next review request waiting until it is
	// closed; held is closed when that request arrives.
	hold, held chan struct{}
}

// holdFirst makes the next review request wait: held is closed when it
// arrives, release lets it go.
func (m *modelServer) holdFirst() (held <-chan struct{}, release func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hold, m.held = make(chan struct{}), make(chan struct{})
	hold := m.hold
	return m.held, func() { close(hold) }
}

func newModelServer(t *testing.T) *modelServer {
	m := &modelServer{}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	m.base = m.srv.URL + "/v1"
	return m
}

// close stops the server and keeps nothing listening at its address, so
// that requests are refused.
func (m *modelServer) close() {
	m.srv.Close()
	if l, err := net.Listen("tcp", strings.TrimPrefix(m.srv.URL, "http://")); err == nil {
		l.Close()
	}
}

func (m *modelServer) reviews() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hunks
}

func (m *modelServer) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/models":
		fmt.Fprint(w, `{"object":"list","data":[{"id":"fake-model","object":"model"}]}`)
	case "/v1/chat/completions":
		var req struct {
			Model    string                           `json:"model"`
			Messages []struct{ Role, Content string } `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if req.Model != "fake-model" {
			// OpenAI's answer for a model it does not know.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"error":{"message":"The model %s does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`, req.Model)
			return
		}
		m.mu.Lock()
		m.hunks++
		delay, hold, held := m.delay, m.hold, m.held
		m.hold, m.held = nil, nil
		m.mu.Unlock()
		if hold != nil {
			close(held)
			select {
			case <-hold:
			case <-r.Context().Done():
			}
			return
		}
		time.Sleep(delay) // a slow model
		content, _ := json.Marshal(findingsIn(req.Messages[len(req.Messages)-1].Content))
		json.NewEncoder(w).Encode(map[string]any{
			"choices": []map[string]any{{"message": map[string]string{"role": "assistant", "content": string(content)}, "finish_reason": "stop"}},
			"usage":   map[string]int{"prompt_tokens": 100, "completion_tokens": 20},
		})
	default:
		http.NotFound(w, r)
	}
}

var hunkHeader = regexp.MustCompile(`^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@`)

// findingsIn reads the file and hunk of a review prompt and reports each
// added line that holds a planted finding.
func findingsIn(prompt string) []map[string]any {
	out := []map[string]any{}
	file, line := "", 0
	sc := bufio.NewScanner(strings.NewReader(prompt))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "File: "):
			file = strings.TrimPrefix(l, "File: ")
		case hunkHeader.MatchString(l):
			line, _ = strconv.Atoi(hunkHeader.FindStringSubmatch(l)[1])
		case line > 0 && strings.HasPrefix(l, "+"):
			if f, ok := fakes.ParseMarker(l); ok {
				out = append(out, map[string]any{"file": file, "line": line, "severity": f.Severity, "category": "bug",
					"confidence": 0.95, "message": f.Message, "suggestion": "fix " + f.ID})
			}
			line++
		case line > 0 && strings.HasPrefix(l, " "):
			line++
		}
	}
	return out
}
