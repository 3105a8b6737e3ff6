package runner

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
	"peal/phase"
)

// runStamp is the prefix every agent log file of a run shares.
var runStamp = regexp.MustCompile(`^\d{8}T\d{6}Z-`)

// agentLogFiles reads every file of dir, keyed by name without the run's
// start time; all of them must carry the same one.
func agentLogFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	stamp := ""
	for _, e := range entries {
		if e.Name() == ".gitignore" {
			continue // a folder peal creates keeps git out
		}
		s := runStamp.FindString(e.Name())
		if s == "" || stamp != "" && s != stamp {
			t.Fatalf("%s does not start with the run's start time", e.Name())
		}
		stamp = s
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(e.Name(), s)] = string(data)
	}
	return files
}

// TestAgentLogs: each attempt of each agent call leaves its own stdout and
// stderr file with exactly what the agent printed; later calls of the same
// task and phase in a run get the next call number instead of overwriting.
func TestAgentLogs(t *testing.T) {
	t.Parallel()
	out := func(stdout, stderr string) fakes.Outcome { return fakes.Outcome{Stdout: stdout, Stderr: stderr} }
	cases := []struct {
		name  string
		plan  string
		rules map[string][]fakes.Outcome
		env   []string
		stet  bool
		want  map[string]string
	}{
		{"a retried call", "## Task 1\nA\n", map[string][]fakes.Outcome{
			"plan":    {out("the plan\n", "plan noise\n")},
			"execute": {{Stdout: "first out\n", Stderr: "first err\n", Exit: 1}, out("second out\n", "second err\n")},
		}, []string{"PEAL_PHASE_RETRY_COUNT=1"}, false, map[string]string{
			"task-1-plan-call-1-attempt-1.stdout.log":    "the plan\n",
			"task-1-plan-call-1-attempt-1.stderr.log":    "plan noise\n",
			"task-1-execute-call-1-attempt-1.stdout.log": "first out\n",
			"task-1-execute-call-1-attempt-1.stderr.log": "first err\n",
			"task-1-execute-call-1-attempt-2.stdout.log": "second out\n",
			"task-1-execute-call-1-attempt-2.stderr.log": "second err\n",
		}},
		{"a plan call run again by validate_plan_text", "## Task 3\nC\n", map[string][]fakes.Outcome{
			"plan":    {{NoStdout: true, Stderr: "said nothing\n"}, out("a plan at last\n", "")},
			"execute": {out("done\n", "")},
		}, []string{"PEAL_VALIDATE_PLAN_TEXT=true"}, false, map[string]string{
			"task-3-plan-call-1-attempt-1.stdout.log":    "",
			"task-3-plan-call-1-attempt-1.stderr.log":    "said nothing\n",
			"task-3-plan-call-2-attempt-1.stdout.log":    "a plan at last\n",
			"task-3-plan-call-2-attempt-1.stderr.log":    "",
			"task-3-execute-call-1-attempt-1.stdout.log": "done\n",
			"task-3-execute-call-1-attempt-1.stderr.log": "",
		}},
		{"normalize and two address rounds", "# Notes\nadd A\n", map[string][]fakes.Outcome{
			"normalize": {out("## Task 1\nAdd A\n", "")},
			"plan":      {out("p\n", "")},
			"execute":   {{Stdout: "e\n", Plant: twoFindings()}},
			"triage":    {out("fix them\n", "")},
			"address":   {out("round 1\n", ""), {Stdout: "round 2\n", StetFix: -1}},
		}, []string{"PEAL_NORMALIZE_PLAN=true"}, true, map[string]string{
			"plan-normalize-call-1-attempt-1.stdout.log": "## Task 1\nAdd A\n",
			"plan-normalize-call-1-attempt-1.stderr.log": "",
			"task-1-plan-call-1-attempt-1.stdout.log":    "p\n",
			"task-1-plan-call-1-attempt-1.stderr.log":    "",
			"task-1-execute-call-1-attempt-1.stdout.log": "e\n",
			"task-1-execute-call-1-attempt-1.stderr.log": "",
			"task-1-triage-call-1-attempt-1.stdout.log":  "fix them\n",
			"task-1-triage-call-1-attempt-1.stderr.log":  "",
			"task-1-address-call-1-attempt-1.stdout.log": "round 1\n",
			"task-1-address-call-1-attempt-1.stderr.log": "",
			"task-1-triage-call-2-attempt-1.stdout.log":  "fix them\n",
			"task-1-triage-call-2-attempt-1.stderr.log":  "",
			"task-1-address-call-2-attempt-1.stdout.log": "round 2\n",
			"task-1-address-call-2-attempt-1.stderr.log": "",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.plan)
			h.scenario(tc.rules)
			dir := filepath.Join(h.tmp, "logs") // created by the run
			env := append([]string{"PEAL_AGENT_LOG_DIR=" + dir}, tc.env...)
			if tc.stet {
				env = append(env, h.withStet(fakes.StetScenario{})...)
			}
			if _, err := h.run(env...); err != nil {
				t.Fatalf("%v\n%s", err, h.log)
			}
			got := agentLogFiles(t, dir)
			if !maps.Equal(got, tc.want) {
				t.Fatalf("agent logs\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// TestAgentLogHoldsWholeStream: 12 MiB of stdout all reach the file while
// the call's in-memory capture keeps 10 MiB and drops the rest.
func TestAgentLogHoldsWholeStream(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	h.scenario(map[string][]fakes.Outcome{"execute": {{StdoutMiB: 12, NoStdout: true}}})
	dir := filepath.Join(h.tmp, "logs")
	if _, err := h.run("PEAL_AGENT_LOG_DIR=" + dir); err != nil {
		t.Fatal(err)
	}
	files := agentLogFiles(t, dir)
	line := strings.Repeat("x", 1023) + "\n"
	if got := files["task-1-execute-call-1-attempt-1.stdout.log"]; got != strings.Repeat(line, 12<<10) {
		t.Fatalf("the log file holds %d bytes, want the whole %d", len(got), 12<<20)
	}
	if !strings.Contains(h.log.String(), "stdout_dropped_bytes=2097152") {
		t.Fatalf("the capture did not stop at %d bytes:\n%s", phase.MaxCapture, h.log)
	}
}

// TestAgentLogsOffByDefault: without agent_log_dir no log file or folder is
// made anywhere.
func TestAgentLogsOffByDefault(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	cfg := h.config()
	if cfg.AgentLogDir != "" {
		t.Fatalf("agent_log_dir defaults to %q", cfg.AgentLogDir)
	}
	before := entries(t, h.tmp)
	if _, err := h.runCfg(cfg); err != nil {
		t.Fatal(err)
	}
	if after := entries(t, h.tmp); !slices.Equal(after, append(before, "state")) {
		t.Fatalf("the run made %v, want only the state folder added to %v", after, before)
	}
	filepath.WalkDir(h.tmp, func(path string, d os.DirEntry, err error) error {
		if strings.HasSuffix(path, ".stdout.log") || strings.HasSuffix(path, ".stderr.log") {
			t.Errorf("agent log written: %s", path)
		}
		return nil
	})
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	list, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// TestAgentLogUnusableIsWarning: a folder that cannot be made is a warning;
// the calls and the run go on (a file that cannot be created: agentlog's
// TestSameSecond).
func TestAgentLogUnusableIsWarning(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	// Under a regular file, in the state folder (elsewhere the
	// configuration refuses a folder whose folder is not one).
	file := filepath.Join(h.stateDir, "a-file")
	os.MkdirAll(h.stateDir, 0o755)
	os.WriteFile(file, nil, 0o644)
	out, err := h.run("PEAL_AGENT_LOG_DIR=" + filepath.Join(file, "logs"))
	if err != nil || !slices.Equal(out.Completed, []int{1}) {
		t.Fatalf("outcome %+v, err %v", out, err)
	}
	if !strings.Contains(h.log.String(), "agent log folder cannot be created") {
		t.Fatalf("no warning:\n%s", h.log)
	}
}

// An agent log folder inside the repository is peal's own: it gets a
// .gitignore and is never part of a task's commit.
func TestAgentLogsNeverCommitted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	testgit.Git(t, h.repo, "commit", "-q", "--allow-empty", "-m", "root")
	h.scenario(map[string][]fakes.Outcome{"execute": {{WriteFiles: map[string]string{"work.txt": "done"}}}})
	dir := filepath.Join(h.repo, "logs")
	if _, err := h.run("PEAL_AGENT_LOG_DIR="+dir, "PEAL_COMMIT_AFTER_PHASE2=true"); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(h.repo, "logs", ".gitignore")); err != nil || string(data) != "*\n" {
		t.Fatalf(".gitignore %q, %v", data, err)
	}
	files := strings.Fields(testgit.Git(t, h.repo, "show", "--name-only", "--format=", "HEAD"))
	if !slices.Equal(files, []string{"work.txt"}) {
		t.Fatalf("the task's commit holds %q", files)
	}
	if status := testgit.Git(t, h.repo, "status", "--porcelain"); status != "" {
		t.Fatalf("git status after the run:\n%s", status)
	}
}
