package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"peal/internal/testkit/fakes"
	"peal/tickets"
)

// TestDryRun: the schedule with argv and models, no child started, no file
// written.
func TestDryRun(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nFirst\n## Task 2 (parallel)\nSecond\n## Task 3 (parallel)\nThird\n")
	stetDir := filepath.Join(s.dir, "stet")
	os.MkdirAll(stetDir, 0o755)
	fakes.WriteStetScenario(stetDir, fakes.StetScenario{})
	// The tickets of tasks 2 and 3 (a parallel block, whose review calls carry
	// task 2's index) have two blocked attempts: their next attempt is the third.
	knowledge := filepath.Join(s.dir, "knowledge")
	for _, i := range []int{2, 3} {
		store := tickets.NewStore(knowledge)
		defer store.Close()
		tk, err := store.Open(s.ticket(i), time.Now(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			tk.Begin(time.Now(), nil)
			tk.Complete(time.Now(), tickets.AttemptBlocked, nil)
		}
		tk.Close()
	}
	before := snapshot(t, s.dir)

	env := s.env("FAKE_STET_DIR="+stetDir, "PEAL_STET_PATH="+bins["fakestet"], "PEAL_KNOWLEDGE_DIR="+knowledge,
		"PEAL_ESCALATION_ENABLED=true", "PEAL_ESCALATION_WORKER=worker-m", "PEAL_ESCALATION_FIXER=fixer-m", "PEAL_MODEL=base-m", "PEAL_MAX_PARALLEL=2", "PEAL_PARALLEL_ISOLATION=shared")
	r := s.peal(env, "run", "--dry-run")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	out := r.stdout
	for _, want := range []string{
		"segment 1: sequential", "segment 2: parallel, at most 2 at once",
		"task 1: ticket " + s.ticket(1) + ", attempt 1", "task 3: ticket " + s.ticket(3) + ", attempt 3",
		"plan     model base-m, attempts 1: " + bins["fakeagent"] + " --print --plan --workspace " + s.workDir() + " --output-format text --trust --model base-m <prompt len=",
		"plan     model worker-m", "address  model fixer-m",
		"after the block's executes, for the block as a whole:", `commit   git add -A; git commit -m "peal: tasks 2, 3 - address round <N>"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "First") || strings.Contains(out, "Third") {
		t.Error("the dry run shows prompt text")
	}
	if s.keys() != "" {
		t.Fatalf("the dry run called the agent: %s", s.keys())
	}
	if calls, _ := fakes.ReadStetCalls(stetDir); len(calls) != 0 {
		t.Fatal("the dry run called stet")
	}
	if after := snapshot(t, s.dir); after != before {
		t.Fatalf("the dry run wrote files:\nbefore %s\nafter  %s", before, after)
	}
}

// TestDryRunWorktrees: under parallel_isolation = worktree the dry run
// shows each task of a block in its worktree, on its branch, with its own
// calls (their workspace the worktree) and review, then the merge back;
// and what each worktree holds (its sparse set, the copied and linked
// paths).
func TestDryRunWorktrees(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1 (parallel)\nFirst\n## Task 2 (parallel)\nSecond\n")
	before := snapshot(t, s.dir)
	env := s.env("PEAL_MAX_PARALLEL=2", "PEAL_PARALLEL_CONFLICT=fail", "PEAL_WORKTREE_COPY=.env", "PEAL_WORKTREE_SETUP_COMMAND=make deps",
		"PEAL_WORKTREE_SPARSE_PATHS=services/api,libs", "PEAL_WORKTREE_LINK=node_modules")
	r := s.peal(env, "run", "--dry-run")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	root := filepath.Join(s.stateDir, "worktrees")
	var branch string
	for _, line := range strings.Split(r.stdout, "\n") {
		if _, b, ok := strings.Cut(line, "task 2: worktree "+filepath.Join(root, "task-2")+", branch "); ok {
			branch, _, _ = strings.Cut(b, ",")
		}
	}
	if !strings.HasPrefix(branch, "peal-") || !strings.HasSuffix(branch, "/task-2") {
		t.Fatalf("no worktree and branch for task 2:\n%s", r.stdout)
	}
	for _, want := range []string{
		"each task in a worktree of its own under " + root,
		"copied into each worktree: .env", "run in each worktree before its first call: make deps",
		"each worktree checks out only services/api, libs and the top-level files (worktree_sparse_paths, git's cone mode)",
		"linked into each worktree from the work tree, shared by the tasks and never committed: node_modules",
		"execute  model (agent default), attempts 1: " + bins["fakeagent"] + " --print --workspace " + filepath.Join(root, "task-2") + " ",
		"merge back: each completed task in plan order", "(parallel_conflict = fail) the task fails",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("dry run lacks %q:\n%s", want, r.stdout)
		}
	}
	if after := snapshot(t, s.dir); after != before {
		t.Fatalf("the dry run wrote files:\nbefore %s\nafter  %s", before, after)
	}
}

// snapshot lists every file under dir with its size, as one string.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, _ := d.Info()
		b.WriteString(strings.TrimPrefix(path, dir) + ":" + info.ModTime().String() + ";")
		return nil
	})
	return b.String()
}

// TestDryRunChecks: the dry run says which checks run, where, under which
// timeout and when, and shows them in each task's rounds; it runs none.
func TestDryRunChecks(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nFirst\n## Task 2 (parallel)\nSecond\n## Task 3 (parallel)\nThird\n")
	before := snapshot(t, s.dir)
	env := s.env("PEAL_CHECK_COMMANDS=go test ./... > ran.txt\nnpm test -- --run --reporter=dot,summary", "PEAL_CHECK_TIMEOUT_SEC=600", "PEAL_MAX_PARALLEL=2")
	r := s.peal(env, "run", "--dry-run")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		"review: none (no stet): the project's checks alone make Phase 3",
		"checks: in order, each through sh -c in the task's work tree (" + s.workDir() + "; a task of a parallel block: its worktree), under 10m0s each:",
		"  1. go test ./... > ran.txt\n  2. npm test -- --run --reporter=dot,summary\n",
		"they run on the starting tree before the first task",
		"    check    go test ./... > ran.txt; npm test -- --run --reporter=dot,summary\n    while a check fails, up to 5 rounds:\n    address  model (agent default), attempts 1:",
		"--force <prompt: the failing checks' output>\n",
		"then the checks run on the work tree (a failure undoes the merge, as a conflict)",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("dry run lacks %q:\n%s", want, r.stdout)
		}
	}
	if after := snapshot(t, s.dir); after != before {
		t.Fatalf("the dry run wrote files (or ran a check):\nbefore %s\nafter  %s", before, after)
	}
}

// TestDryRunSessions: with agent_session = "task", the dry run shows the
// session arguments of each call: the plan begins the task's session (with
// an id peal chooses, for Claude Code; none for the Cursor CLI, which
// gives it), the execute continues it; without, no call names one.
func TestDryRunSessions(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nFirst\n")
	for _, c := range []struct {
		env           []string
		plan, execute string
	}{
		{[]string{"PEAL_AGENT_SESSION=task"}, "--output-format stream-json --trust <prompt len=", "--trust --force --resume <session> <prompt: the plan text>"},
		{[]string{"PEAL_AGENT_SESSION=task", "PEAL_AGENT_KIND=claude"}, "--permission-mode plan --session-id <session> < <prompt len=", "--permission-mode bypassPermissions --resume <session> < <prompt: the plan text>"},
		{[]string{"PEAL_AGENT_KIND=claude"}, "--permission-mode plan < <prompt len=", "--permission-mode bypassPermissions < <prompt: the plan text>"},
	} {
		r := s.peal(s.env(c.env...), "run", "--dry-run")
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", c.env, r.code, r.stderr)
		}
		var plan, execute string
		for _, line := range strings.Split(r.stdout, "\n") {
			switch f := strings.Fields(line); {
			case len(f) > 0 && f[0] == "plan":
				plan = line
			case len(f) > 0 && f[0] == "execute":
				execute = line
			}
		}
		if !strings.Contains(plan, c.plan) || !strings.Contains(execute, c.execute) {
			t.Errorf("%v:\n%s\n%s\nwant %q and %q", c.env, plan, execute, c.plan, c.execute)
		}
	}
}

// TestConfinePathRefusedBeforeAnything: a confinement path that would
// write the repository's .git, a system folder or a path that does not
// exist stops a run, a dry run, and `peal status` with exit 1 and one line
// naming the key and the value, before any agent call and without writing
// anything; `peal config` shows that line instead of a policy.
func TestConfinePathRefusedBeforeAnything(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nA\n")
	cases := map[string]string{
		s.repo:                            `peal: error: confine_write_paths "` + s.repo + `" (set by PEAL_CONFINE_WRITE_PATHS) is or holds the repository's .git (` + filepath.Join(s.repo, ".git") + `), which no confined call writes: name a folder beside it, or drop it`,
		filepath.Join(s.repo, ".git"):     `peal: error: confine_write_paths "` + filepath.Join(s.repo, ".git") + `" (set by PEAL_CONFINE_WRITE_PATHS) is or holds the repository's .git`,
		"/":                               `peal: error: confine_write_paths "/" (set by PEAL_CONFINE_WRITE_PATHS) is /, a system folder: every call could change it; name the folders the calls need, or drop it`,
		filepath.Join(s.dir, "not-there"): `peal: error: confine_write_paths "` + filepath.Join(s.dir, "not-there") + `" (set by PEAL_CONFINE_WRITE_PATHS) does not exist: create it, or drop it`,
	}
	before := snapshot(t, s.dir)
	for path, want := range cases {
		env := s.env("PEAL_CONFINE=auto", "PEAL_CONFINE_WRITE_PATHS="+path)
		for _, args := range [][]string{{"run"}, {"run", "--dry-run"}, {"status"}} {
			r := s.peal(env, args...)
			if r.code != 1 || !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
				t.Errorf("%s %v: exit %d, stdout %q, stderr %q; want one line %q", path, args, r.code, r.stdout, r.stderr, want)
			}
		}
		r := s.peal(env, "config")
		if r.code != 0 || !strings.Contains(r.stdout, "confinement on this machine:\n  "+strings.TrimPrefix(want, "peal: error: ")) || strings.Contains(r.stdout, "never written") {
			t.Errorf("%s: config shows:\n%s", path, r.stdout)
		}
	}
	if s.keys() != "" {
		t.Fatalf("agent called: %s", s.keys())
	}
	if after := snapshot(t, s.dir); after != before {
		t.Fatalf("files changed:\nbefore %v\nafter  %v", before, after)
	}
}
