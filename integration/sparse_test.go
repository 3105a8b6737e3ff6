package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"peal/internal/testkit/mockllm"
	"peal/internal/testkit/testgit"
)

// The block of TestPealSparseWorktrees: each task notes, in a file of its
// work, what its worktree holds (every path but git's, and where the
// linked node_modules points), then writes a file of its own; task 3's is
// outside the sparse set.
var sparseFiles = []string{"app/one.txt", "lib/two.txt", "docs/three.txt"}

// sparseScript answers the plan call of task N with a plan naming PLAN-N,
// and its execute with a shell call that lists the worktree into
// app/seen-N.txt and writes the task's file.
func sparseScript() mockllm.Script {
	var s mockllm.Script
	for i, f := range sparseFiles {
		n := i + 1
		// No command substitution: Gemini CLI refuses it. The listing
		// leaves its own file out: the shell makes it while find runs.
		list := fmt.Sprintf("find . -name .git -prune -o ! -name 'seen-*' -print | LC_ALL=C sort > app/seen-%[1]d.txt; printf 'link ' >> app/seen-%[1]d.txt; "+
			"readlink node_modules >> app/seen-%[1]d.txt; mkdir -p %[2]s; printf 'task %[1]d\\n' > %[3]s", n, filepath.Dir(f), f)
		s.Rules = append(s.Rules,
			mockllm.Rule{Contains: fmt.Sprintf("PLAN-%d:", n), Replies: []mockllm.Reply{
				{Text: "Looking around, then writing the file.", Tool: shellRun(list)},
				{Text: fmt.Sprintf("DONE-%d", n)},
			}},
			mockllm.Rule{Contains: fmt.Sprintf("TASK-%d ", n), Replies: []mockllm.Reply{{Text: fmt.Sprintf("PLAN-%d: write %s.", n, f)}}},
		)
	}
	return s
}

// TestPealSparseWorktrees: a block of three tasks through a real CLI, two
// at a time, each in a sparse worktree (worktree_sparse_paths = app,lib)
// with node_modules linked from the work tree, reviewed by the real stet
// when PEAL_STET_BIN names one (in the task's worktree, from its commits):
// every worktree holds the set and the top-level files only, task 3's write outside the set is committed,
// merged and named, no link is committed, the work tree stays a full
// checkout with docs/ as it was, and nothing is left behind.
func TestPealSparseWorktrees(t *testing.T) {
	t.Parallel()
	eachAgent(t, func(t *testing.T, a agent) {
		bin := findCLI(t, a.kind)
		peal := pealBin(t)
		sb := newSandbox(t, filepath.Dir(bin))
		srv := pealMock(sparseScript())
		t.Cleanup(srv.Close)
		root := filepath.Dir(sb.repo)
		plan, state, logFile := filepath.Join(root, "plan.md"), filepath.Join(root, "state"), filepath.Join(root, "peal.log")
		var body strings.Builder
		for i, f := range sparseFiles {
			fmt.Fprintf(&body, "## Task %d (parallel)\n\nTASK-%d write %s.\n\n", i+1, i+1, f)
		}
		writeFile(t, plan, body.String())
		writeFile(t, filepath.Join(sb.home, ".gitconfig"), "[user]\n\tname = t\n\temail = t@example.invalid\n")
		env := a.pealEnv(t, sb, srv.URL, testKey)
		gitOut := func(args ...string) string { return gitIn(t, sb.repo, env, args...) }
		for _, f := range []string{"app/main.txt", "app/sub/deep.txt", "lib/util.txt", "docs/guide.txt", "docs/api/ref.txt"} {
			writeFile(t, filepath.Join(sb.repo, f), f+"\n")
		}
		writeFile(t, filepath.Join(sb.repo, ".gitignore"), "node_modules/\n")
		gitOut("add", "-A")
		gitOut("commit", "-qm", "folders")
		writeFile(t, filepath.Join(sb.repo, "node_modules", "left-pad", "index.js"), "module.exports = 1\n")

		args := []string{"run", "--plan", plan, "--repo", sb.repo, "--state-dir", state, "--agent-kind", a.kind, "--agent-cmd", bin,
			"--max-parallel", "2", "--commit-after-phase2", "--log-file", logFile, "--worktree-sparse-paths", "app,lib", "--worktree-link", "node_modules"}
		env, stetCalls := withRecordedStet(t, root, env)
		withStet := stetCalls != ""
		start := time.Now()
		r := run(t, sb.repo, env, nil, 20*time.Minute, append([]string{peal}, args...)...)
		t.Logf("%s: sparse block of 3 (stet %v) in %s", a.kind, withStet, time.Since(start).Round(time.Millisecond))
		if r.code != 0 {
			t.Fatalf("want exit 0\n%s\nmock requests:\n%s", r, describe(srv))
		}
		for i, f := range sparseFiles {
			if got, err := os.ReadFile(filepath.Join(sb.repo, f)); err != nil || string(got) != fmt.Sprintf("task %d\n", i+1) {
				t.Errorf("%s = %q (%v)", f, got, err)
			}
		}
		// Each worktree held the set, its folders' parents and the
		// top-level files, and node_modules as a link to the work tree's.
		for n := 1; n <= 3; n++ {
			seen, err := os.ReadFile(filepath.Join(sb.repo, "app", fmt.Sprintf("seen-%d.txt", n)))
			if err != nil {
				t.Fatalf("task %d noted nothing: %v", n, err)
			}
			t.Logf("task %d's worktree held:\n%s", n, seen)
			want := fmt.Sprintf(".\n./.gitignore\n./README.md\n./app\n./app/main.txt\n./app/sub\n./app/sub/deep.txt\n./lib\n./lib/util.txt\n./node_modules\nlink %s\n",
				filepath.Join(sb.repo, "node_modules"))
			if string(seen) != want {
				t.Errorf("task %d's worktree held:\n%s\nwant:\n%s", n, seen, want)
			}
		}
		log, _ := os.ReadFile(logFile)
		if !strings.Contains(string(log), `"msg":"the task wrote outside worktree_sparse_paths: those files are committed and merged with the rest of its work","task":3,"files":"docs/three.txt"`) {
			t.Errorf("no warning of task 3's write outside the set in the log")
		}
		for _, f := range []string{"docs/guide.txt", "docs/api/ref.txt", "node_modules/left-pad/index.js"} {
			if _, err := os.Stat(filepath.Join(sb.repo, f)); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
		if got := gitOut("log", "--all", "--format=", "--name-only"); strings.Contains(got, "node_modules") {
			t.Errorf("node_modules was committed:\n%s", got)
		}
		if st := gitOut("status", "--porcelain"); st != "" {
			t.Errorf("work tree not clean: %q", st)
		}
		if skipped := slices.DeleteFunc(strings.Split(gitOut("ls-files", "-t"), "\n"), func(l string) bool { return strings.HasPrefix(l, "H ") }); len(skipped) > 0 {
			t.Errorf("the work tree is not a full checkout: %q", skipped)
		}
		if left := testgit.WorktreeLeftovers(t, sb.repo, state); len(left) > 0 {
			t.Errorf("left behind: %q", left)
		}
		if withStet {
			reportStet(t, stetCalls, state, len(sparseFiles))
		}
	})
}
