package main

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
)

// TestNothingLostProperty runs plans whose agents do random damage to the
// repository — remove, replace or chmod the user's files, remove
// everything, fill the tree, rewrite history, move the user's refs, stash
// or switch branch, fail after doing so — with the plan edited between
// runs (a task's text changed, a task inserted, removed, moved or
// appended) and runs cut off at random moments (SIGKILL, SIGINT); and after
// every run checks the rule peal keeps:
//
//   - every byte of the user's tracked, staged, untracked and ignored files
//     as they were at the start is still in place, or in a commit on the
//     user's branch or a ref `peal status` names (a killed run's work is
//     settled by the next run, so the check waits for it);
//   - the user's branch is still checked out and was only added to, and
//     the user's other refs did not move;
//   - a task `peal status` calls completed had its plan and execute calls
//     run for its text as the plan says it now.
//
// It runs under the suite's confine setting (CI runs both). A few rounds run
// by default; PEAL_PROPERTY=<rounds> runs more, PEAL_PROPERTY_SEED=<n>
// repeats a round's randomness.
func TestNothingLostProperty(t *testing.T) {
	t.Parallel()
	rounds := 2
	if n, err := strconv.Atoi(os.Getenv("PEAL_PROPERTY")); err == nil && n > 0 {
		rounds = n
	}
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("PEAL_PROPERTY_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (PEAL_PROPERTY_SEED)", seed)
	for round := range rounds {
		rng := rand.New(rand.NewPCG(seed, uint64(round)))
		t.Run(fmt.Sprintf("round %d", round+1), func(t *testing.T) {
			t.Parallel()
			propertyRound(t, rng)
		})
	}
}

// A damage is what a task's agent does on its first execute, besides its
// own work: a shell command in the task's folder, and whether the call
// then fails.
type damage struct {
	name  string
	cmd   string
	fails bool
}

var damages = []damage{
	{name: "none"},
	{name: "remove", cmd: "rm -f a.txt u.txt .env build/out.bin"},
	{name: "replace", cmd: "printf replaced > a.txt; printf replaced > .env; printf replaced > src/b.txt; printf replaced > u.txt"},
	{name: "remove everything", cmd: "rm -rf ./* .env .gitignore"},
	{name: "chmod", cmd: "chmod 000 u.txt; chmod 4755 c.txt"},
	{name: "fill", cmd: "mkdir -p fill && for i in $(seq 1 300); do echo $i > fill/f$i; done"},
	{name: "reset back", cmd: "git reset -q --hard HEAD~1"},
	{name: "amend", cmd: "git commit -q --amend --allow-empty -m amended"},
	{name: "move refs", cmd: "git update-ref refs/heads/other HEAD; git tag -f v0 HEAD~1"},
	{name: "switch branch", cmd: "git checkout -q -b elsewhere"},
	{name: "stash", cmd: "git stash -q -u"},
	{name: "fail after removing", cmd: "rm -f a.txt u.txt", fails: true},
}

// propTask is a task of the plan as the test wrote it: its text (which is
// what peal knows it by) and the damage its first execute does.
type propTask struct {
	id       int // its own, whatever its number
	text     string
	damage   damage
	parallel bool
	damaged  bool // its first execute has run
}

// propFile is a version of a file of the user's at the start: its path,
// what it was (tracked, staged, untracked, ignored) and its blob.
type propFile struct {
	path, what, blob string
}

func propertyRound(t *testing.T, rng *rand.Rand) {
	s := newSandbox(t, "")
	// The fake agent under a CLI's name, which runs the damage as its
	// shell tool.
	env := append(claudeEnv(t, s, "PEAL_CONTINUE_WITH_REMAINING_TASKS="+strconv.FormatBool(rng.IntN(2) == 0)), testgit.Env...)
	git := func(args ...string) string { return s.git(env, args...) }
	nonce := strconv.FormatUint(rng.Uint64(), 36)
	write := func(rel, data string) {
		p := filepath.Join(s.repo, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data+" "+nonce+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The user's repository: two commits, a tag and another branch, and
	// work of every kind not committed.
	write(".gitignore", ".env\nbuild/\n#")
	write("a.txt", "a committed")
	write("src/b.txt", "b committed")
	write("c.txt", "c first")
	git("add", ".")
	git("commit", "-q", "-m", "root")
	write("c.txt", "c second")
	git("commit", "-q", "-am", "second")
	git("branch", "other", "HEAD~1")
	git("tag", "v0")
	branch := strings.TrimSpace(git("symbolic-ref", "--short", "HEAD"))
	head := strings.TrimSpace(git("rev-parse", "HEAD"))
	refs := strings.TrimSpace(git("for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/other", "refs/tags/v0"))
	write("a.txt", "a edited, not committed")
	write("src/b.txt", "b staged")
	git("add", "src/b.txt")
	write("src/b.txt", "b edited after staging")
	write("u.txt", "untracked")
	write(".env", "SECRET=ignored")
	write("build/out.bin", "built, ignored")
	files := userFiles(t, s.repo, git)

	commits := rng.IntN(2) == 0
	if commits {
		env = append(env, "PEAL_COMMIT_AFTER_PHASE2=true", "PEAL_MAX_PARALLEL=2")
	}
	if rng.IntN(2) == 0 {
		// The project's check: a file of the user's committed work is
		// there (a task that removed everything fails it).
		env = append(env, "PEAL_CHECK_COMMANDS=test -e c.txt")
	}
	words := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"}
	var made int
	newTask := func() *propTask {
		made++
		return &propTask{id: made, text: fmt.Sprintf("Write the %s note %d of %s.", words[rng.IntN(len(words))], made, nonce),
			damage: damages[rng.IntN(len(damages))], parallel: commits && rng.IntN(3) == 0}
	}
	tasks := []*propTask{newTask(), newTask(), newTask()}
	done := map[string]bool{} // texts whose plan and execute ran in some run
	for run := 1; run <= 4; run++ {
		writePlan(t, s, tasks)
		scenarioFor(t, s, tasks)
		os.Remove(filepath.Join(s.agentDir, fakes.CallsFile))
		p := startStress(t, s, env)
		sig := []syscall.Signal{0, 0, syscall.SIGKILL, syscall.SIGINT}[rng.IntN(4)]
		if sig != 0 {
			select {
			case <-p.done:
			case <-time.After(time.Duration(rng.IntN(2500)) * time.Millisecond):
				p.cmd.Process.Signal(sig)
			}
		}
		code := p.wait(t)
		calls, err := fakes.ReadCalls(s.agentDir)
		if err != nil {
			t.Fatal(err)
		}
		started, ran := executed(calls, tasks)
		for _, tk := range tasks {
			done[tk.text] = done[tk.text] || ran[tk.text]
			if started[tk.text] && !tk.damaged && tk.damage.cmd != "" && sig == 0 {
				// The damage ran (the test would prove nothing if the
				// agent's tool did not run it).
				if _, err := os.Stat(filepath.Join(s.agentDir, fmt.Sprintf("damaged-%d", tk.id))); err != nil {
					t.Fatalf("run %d: the damage %q of task %q did not run", run, tk.damage.name, tk.text)
				}
			}
			tk.damaged = tk.damaged || started[tk.text]
		}
		t.Logf("run %d: signal %v, exit %d; tasks %s", run, sig, code, describeTasks(tasks))
		for _, c := range calls {
			if c.Event == fakes.EventEnd && len(c.Denied) > 0 {
				t.Fatalf("run %d: the agent was refused %q: the damage did not run", run, c.Denied)
			}
		}
		checkNothingLeft(t, s, fakes.Starts(calls))
		// A killed run leaves its task's work for the next run to settle:
		// the rule holds once a run could.
		killed := sig == syscall.SIGKILL && code == -1
		if !killed {
			status := propStatus(t, s, env)
			checkKept(t, s.repo, git, files, status)
			checkRefs(t, git, branch, head, refs)
			checkCompleted(t, status, tasks, done)
		}
		if code == 0 {
			break
		}
		editPlan(rng, &tasks, newTask)
	}
}

// userFiles are the versions of the user's files at the start: what the
// work tree holds (tracked, untracked, ignored) and what the index holds
// where it differs from both HEAD and the work tree.
func userFiles(t *testing.T, repo string, git func(...string) string) []propFile {
	t.Helper()
	var out []propFile
	for _, line := range strings.Split(strings.TrimSpace(git("ls-files", "-s")), "\n") {
		// <mode> <blob> <stage>\t<path>
		meta, path, _ := strings.Cut(line, "\t")
		if f := strings.Fields(meta); len(f) == 3 {
			out = append(out, propFile{path: path, what: "staged or tracked", blob: f[1]})
		}
	}
	for what, args := range map[string][]string{
		"tracked":   {"ls-files"},
		"untracked": {"ls-files", "--others", "--exclude-standard"},
		"ignored":   {"ls-files", "--others", "--ignored", "--exclude-standard"},
	} {
		for _, path := range strings.Fields(git(args...)) {
			data, err := os.ReadFile(filepath.Join(repo, path))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, propFile{path: path, what: what, blob: blobOf(data)})
		}
	}
	if len(out) < 10 {
		t.Fatalf("the user's files are not all there: %+v", out)
	}
	return out
}

// propStatus is `peal status --json` of the sandbox's plan.
func propStatus(t *testing.T, s *sandbox, env []string) statusJSON {
	t.Helper()
	r := s.peal(env, "status", "--json")
	if r.code != 0 {
		t.Fatalf("peal status: exit %d: %s", r.code, r.stderr)
	}
	var st statusJSON
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("peal status --json: %v\n%s", err, r.stdout)
	}
	return st
}

type statusJSON struct {
	Tasks []struct {
		Index  int    `json:"index"`
		Status string `json:"status"`
	} `json:"tasks"`
	Kept []struct {
		Ref string `json:"ref"`
	} `json:"kept"`
}

// checkKept: every version of the user's files at the start is in the
// work tree, in the index, or in a commit of the user's branch or of a ref
// `peal status` names.
func checkKept(t *testing.T, repo string, git func(...string) string, files []propFile, st statusJSON) {
	t.Helper()
	have := map[string]bool{}
	for _, line := range strings.Split(git("ls-files", "-s"), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			have[f[1]] = true
		}
	}
	// Every file in the work tree, ignored ones included (read as root: a
	// file a task made unreadable still holds its bytes).
	filepath.WalkDir(repo, func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case d.IsDir() && d.Name() == ".git":
			return filepath.SkipDir
		case d.Type().IsRegular():
			if data, err := os.ReadFile(path); err == nil {
				have[blobOf(data)] = true
			}
		}
		return nil
	})
	roots := []string{"HEAD"}
	for _, k := range st.Kept {
		roots = append(roots, k.Ref)
	}
	for _, line := range strings.Split(git(append([]string{"rev-list", "--objects"}, roots...)...), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			have[f[0]] = true
		}
	}
	for _, f := range files {
		if !have[f.blob] {
			t.Errorf("the %s file %s as it was at the start (%s) is nowhere: not in the work tree, the index, the branch, nor what peal status names (%v)",
				f.what, f.path, f.blob[:8], st.Kept)
		}
	}
	if t.Failed() {
		if dir := os.Getenv("PEAL_PROPERTY_KEEP"); dir != "" {
			os.RemoveAll(dir)
			os.CopyFS(dir, os.DirFS(repo))
		}
		t.Fatalf("the work tree now:\n%s\nthe index:\n%s\nrefs:\n%s", git("status", "--porcelain", "--ignored"), git("ls-files", "-s"),
			git("for-each-ref", "--format=%(refname) %(objectname:short) %(subject)"))
	}
}

// checkRefs: the user's branch is checked out and holds the commit it
// started at; the other refs of the user's did not move.
func checkRefs(t *testing.T, git func(...string) string, branch, head, refs string) {
	t.Helper()
	if now := strings.TrimSpace(git("symbolic-ref", "--short", "HEAD")); now != branch {
		t.Fatalf("HEAD is on %q, not on the user's branch %q", now, branch)
	}
	if contains := git("branch", "--contains", head, "--format=%(refname:short)"); !slices.Contains(strings.Fields(contains), branch) {
		t.Fatalf("the user's branch %s no longer holds the commit it started at (%s): history was rewritten", branch, head[:8])
	}
	if now := strings.TrimSpace(git("for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/other", "refs/tags/v0")); now != refs {
		t.Fatalf("the user's refs moved:\n%s\nwere\n%s", now, refs)
	}
}

// checkCompleted: a task peal calls completed ran, in some run, its plan
// and execute calls for its text as the plan says it now.
func checkCompleted(t *testing.T, st statusJSON, tasks []*propTask, done map[string]bool) {
	t.Helper()
	for _, ts := range st.Tasks {
		if ts.Status != "completed" {
			continue
		}
		if ts.Index < 1 || ts.Index > len(tasks) {
			t.Fatalf("peal status names a task %d the plan does not have", ts.Index)
		}
		if tk := tasks[ts.Index-1]; !done[tk.text] {
			t.Fatalf("task %d (%q) is called completed, but no run planned and executed it in these words", ts.Index, tk.text)
		}
	}
}

// executed are, among the calls of one run (where a task's number means
// one text), the texts whose execute started after their plan call, and
// those whose execute succeeded.
func executed(calls []fakes.Call, tasks []*propTask) (started, succeeded map[string]bool) {
	planned := map[string]string{} // task number -> text
	started, succeeded = map[string]bool{}, map[string]bool{}
	for _, c := range calls {
		switch {
		case c.Event == fakes.EventStart && c.Phase == "plan":
			for _, tk := range tasks {
				if strings.Contains(promptOfCall(c), tk.text) {
					planned[c.Task] = tk.text
				}
			}
		case c.Phase != "execute" || planned[c.Task] == "":
		case c.Event == fakes.EventStart:
			started[planned[c.Task]] = true
		case c.Exit == 0:
			succeeded[planned[c.Task]] = true
		}
	}
	return started, succeeded
}

// blobOf is git's name of a file holding data.
func blobOf(data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// promptOfCall is the prompt a fake agent's call was given.
func promptOfCall(c fakes.Call) string {
	if c.Stdin != "" {
		return c.Stdin
	}
	if len(c.Argv) == 0 {
		return ""
	}
	return c.Argv[len(c.Argv)-1]
}

func writePlan(t *testing.T, s *sandbox, tasks []*propTask) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# The plan\n\n")
	for i, tk := range tasks {
		mark := ""
		if tk.parallel {
			mark = " (parallel)"
		}
		fmt.Fprintf(&b, "## Task %d%s\n%s\n\n", i+1, mark, tk.text)
	}
	if err := os.WriteFile(s.plan, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// scenarioFor makes each task's execute write its own file, and do its
// damage the first time its text runs.
func scenarioFor(t *testing.T, s *sandbox, tasks []*propTask) {
	t.Helper()
	rules := map[string][]fakes.Outcome{}
	for i, tk := range tasks {
		out := fakes.Outcome{WriteFiles: map[string]string{fmt.Sprintf("work-%d.txt", i+1): tk.text + "\n"}}
		if !tk.damaged && tk.damage.cmd != "" {
			out.Commands = [][]string{{"sh", "-c", fmt.Sprintf(`%s; touch "$%s/damaged-%d"`, tk.damage.cmd, fakes.AgentDirEnv, tk.id)}}
		}
		if !tk.damaged && tk.damage.fails {
			out.Exit = 1
		}
		rules[fmt.Sprintf("execute:%d", i+1)] = []fakes.Outcome{out}
	}
	s.scenario(rules)
}

// editPlan changes the plan as a user might between runs: nothing, a
// task's text, a task inserted, removed, moved, or appended.
func editPlan(rng *rand.Rand, tasks *[]*propTask, newTask func() *propTask) {
	ts := *tasks
	switch rng.IntN(6) {
	case 1:
		i := rng.IntN(len(ts))
		ts[i] = newTask()
	case 2:
		i := rng.IntN(len(ts) + 1)
		ts = slices.Insert(ts, i, newTask())
	case 3:
		if len(ts) > 1 {
			i := rng.IntN(len(ts))
			ts = slices.Delete(ts, i, i+1)
		}
	case 4:
		i, j := rng.IntN(len(ts)), rng.IntN(len(ts))
		ts[i], ts[j] = ts[j], ts[i]
	case 5:
		ts = append(ts, newTask())
	}
	*tasks = ts
}

func describeTasks(tasks []*propTask) string {
	var parts []string
	for i, tk := range tasks {
		parts = append(parts, fmt.Sprintf("%d:%s", i+1, tk.damage.name))
	}
	return strings.Join(parts, " ")
}
