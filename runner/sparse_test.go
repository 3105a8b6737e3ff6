package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
	"peal/plan"
	"peal/report"
	"peal/worktree"
)

// sparseHarness is an isolated harness whose first commit also holds the
// folders a, b and c (each with f.txt and sub/g.txt) and top.txt.
func sparseHarness(t *testing.T, plan string) *harness {
	t.Helper()
	h := isolatedHarness(t, plan)
	for _, d := range []string{"a", "b", "c"} {
		os.MkdirAll(filepath.Join(h.repo, d, "sub"), 0o755)
		os.WriteFile(filepath.Join(h.repo, d, "f.txt"), []byte(d+"\n"), 0o644)
		os.WriteFile(filepath.Join(h.repo, d, "sub", "g.txt"), []byte(d+" sub\n"), 0o644)
	}
	os.WriteFile(filepath.Join(h.repo, "top.txt"), []byte("top\n"), 0o644)
	testgit.Git(t, h.repo, "add", "-A")
	testgit.Git(t, h.repo, "commit", "-q", "-m", "folders")
	return h
}

// snapshotTree is a command for the fake agent that notes, in the files
// files-<n> and status-<n> of dir, which files its worktree holds and what
// git status says there, before the task writes anything.
func snapshotTree(dir string, n int) []string {
	return []string{"sh", "-c", fmt.Sprintf("find . -path ./.git -prune -o -type f -print | sort > %[1]s/files-%[2]d; git status --porcelain > %[1]s/status-%[2]d",
		dir, n)}
}

// fullCheckout checks that the work tree of h is a full checkout: no path
// is skipped, and git's sparse checkout is off there.
func fullCheckout(t *testing.T, h *harness) {
	t.Helper()
	for _, line := range strings.Split(testgit.Git(t, h.repo, "ls-files", "-t"), "\n") {
		if !strings.HasPrefix(line, "H ") {
			t.Fatalf("the work tree is not a full checkout: %q", line)
		}
	}
	if err := gitFails(h, "config", "--get", "core.sparseCheckout"); err == nil {
		t.Fatal("sparse checkout is on in the work tree")
	}
}

// TestWorktreeSparse: with worktree_sparse_paths, each task's worktree holds
// the folder of the set and the top-level files only, git sees nothing
// deleted there, and the tasks' work merges back into the work tree, which
// stays a full checkout with the folders outside the set as they were.
func TestWorktreeSparse(t *testing.T) {
	t.Parallel()
	h := sparseHarness(t, parallelPlan("pp"))
	h.scenario(map[string][]fakes.Outcome{
		"execute:1": {{Commands: [][]string{snapshotTree(h.agentDir, 1), {"sh", "-c", "echo one > a/one.txt"}}}},
		"execute:2": {{Commands: [][]string{snapshotTree(h.agentDir, 2), {"sh", "-c", "echo two > a/sub/two.txt"}}}},
	})
	out, err := h.run("PEAL_MAX_PARALLEL=2", "PEAL_WORKTREE_SPARSE_PATHS=a")
	if err != nil || !slices.Equal(out.Completed, []int{1, 2}) {
		t.Fatalf("err %v, outcome %+v\n%s", err, out, h.log.String())
	}
	for n := 1; n <= 2; n++ {
		if got, want := fileIn(t, h.agentDir, fmt.Sprintf("files-%d", n)), "./a/f.txt\n./a/sub/g.txt\n./base.txt\n./top.txt\n"; got != want {
			t.Errorf("task %d's worktree held %q, want %q", n, got, want)
		}
		if got := fileIn(t, h.agentDir, fmt.Sprintf("status-%d", n)); got != "" {
			t.Errorf("git status in task %d's worktree: %q", n, got)
		}
	}
	if fileIn(t, h.repo, "a/one.txt") != "one\n" || fileIn(t, h.repo, "a/sub/two.txt") != "two\n" {
		t.Fatal("the tasks' work is not in the work tree")
	}
	for _, d := range []string{"b", "c"} {
		if fileIn(t, h.repo, d+"/f.txt") != d+"\n" || fileIn(t, h.repo, d+"/sub/g.txt") != d+" sub\n" {
			t.Fatalf("%s changed in the work tree", d)
		}
	}
	if got := testgit.Git(t, h.repo, "diff", "--name-only", "HEAD~2", "HEAD"); got != "a/one.txt\na/sub/two.txt" {
		t.Fatalf("the block changed %q", got)
	}
	if got := testgit.Git(t, h.repo, "status", "--porcelain"); got != "" {
		t.Fatalf("work tree not clean: %q", got)
	}
	fullCheckout(t, h)
	if strings.Contains(h.log.String(), "outside worktree_sparse_paths") {
		t.Fatalf("a write outside the set reported:\n%s", h.log.String())
	}
	if left := leftovers(t, h); len(left) > 0 {
		t.Fatalf("left behind: %q", left)
	}
}

// TestWorktreeSparseWriteOutside: a task that writes outside the sparse set
// (a new file in a folder outside it, a new content for a tracked file it
// did not have) gets its work committed and merged like the rest, and one
// warning names the files.
func TestWorktreeSparseWriteOutside(t *testing.T) {
	t.Parallel()
	h := sparseHarness(t, parallelPlan("pp"))
	h.scenario(map[string][]fakes.Outcome{
		"execute:1": {writes("a/in.txt", "in\n", "b/new.txt", "new\n", "c/sub/g.txt", "rewritten\n")},
		"execute:2": {writes("a/two.txt", "two\n")},
	})
	out, err := h.run("PEAL_MAX_PARALLEL=2", "PEAL_WORKTREE_SPARSE_PATHS=a")
	if err != nil || !slices.Equal(out.Completed, []int{1, 2}) {
		t.Fatalf("err %v, outcome %+v\n%s", err, out, h.log.String())
	}
	for name, want := range map[string]string{"a/in.txt": "in\n", "b/new.txt": "new\n", "c/sub/g.txt": "rewritten\n", "c/f.txt": "c\n", "b/f.txt": "b\n", "a/two.txt": "two\n"} {
		if got := fileIn(t, h.repo, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	want := `msg="the task wrote outside worktree_sparse_paths: those files are committed and merged with the rest of its work" task=1 files="b/new.txt, c/sub/g.txt"`
	if log := h.log.String(); !strings.Contains(log, want) || strings.Count(log, "outside worktree_sparse_paths") != 1 {
		t.Fatalf("no %q (once) in the log:\n%s", want, log)
	}
	if got := testgit.Git(t, h.repo, "status", "--porcelain"); got != "" {
		t.Fatalf("work tree not clean: %q", got)
	}
	fullCheckout(t, h)
	if left := leftovers(t, h); len(left) > 0 {
		t.Fatalf("left behind: %q", left)
	}
}

// TestWorktreeSparseReview: with stet, a task in a sparse worktree is
// reviewed and addressed as in a full one, a finding outside the set
// included: stet's own worktree is made from the task's, and its fixes are
// committed and merged.
func TestWorktreeSparseReview(t *testing.T) {
	t.Parallel()
	h := sparseHarness(t, parallelPlan("pp"))
	env := h.withStet(fakes.StetScenario{})
	h.scenario(map[string][]fakes.Outcome{
		"execute:1": plants(twoFindings()...), // a.go, and vendor/b.go outside the set
		"execute:2": {writes("a/two.txt", "2")},
		"address":   {{StetFix: -1}},
	})
	out, err := h.run(append(env, "PEAL_MAX_PARALLEL=2", "PEAL_STET_DISABLE_LLM_TRIAGE=true", "PEAL_WORKTREE_SPARSE_PATHS=a")...)
	if err != nil || !slices.Equal(out.Completed, []int{1, 2}) {
		t.Fatalf("err %v, outcome %+v\n%s", err, out, h.log.String())
	}
	perTask := map[string][]string{}
	for _, c := range h.stetCalls() {
		if task := c.Env["PEAL_TASK_INDEX"]; task != "" {
			perTask[task] = append(perTask[task], c.Cmd)
		}
	}
	if got := strings.Join(perTask["1"], " "); got != "start run run run run finish" {
		t.Errorf("task 1's stet commands %q", got)
	}
	commits := strings.Join(strings.Split(testgit.Git(t, h.repo, "log", "--reverse", "--topo-order", "--format=%s", "--no-merges"), "\n"), "|")
	if commits != "root|folders|peal: task 1 - fake plan output for task 1|peal: task 1 - address round 1|peal: task 2 - fake plan output for task 2" {
		t.Fatalf("commits %q", commits)
	}
	for _, f := range []string{"a.go", "vendor/b.go"} {
		if strings.Contains(fileIn(t, h.repo, f), "STET") {
			t.Errorf("%s still holds a finding:\n%s", f, fileIn(t, h.repo, f))
		}
	}
	fullCheckout(t, h)
	if left := leftovers(t, h); len(left) > 0 {
		t.Fatalf("left behind: %q", left)
	}
}

// linkHarness is a sparse harness whose work tree has two ignored folders:
// node_modules (ignored as "node_modules/", a pattern that matches no
// link) and .venv (ignored by a .gitignore inside it, as venv makes it).
func linkHarness(t *testing.T, plan string) *harness {
	t.Helper()
	h := sparseHarness(t, plan)
	os.WriteFile(filepath.Join(h.repo, ".gitignore"), []byte("node_modules/\n"), 0o644)
	testgit.Git(t, h.repo, "add", ".gitignore")
	testgit.Git(t, h.repo, "commit", "-q", "-m", "ignore node_modules")
	os.MkdirAll(filepath.Join(h.repo, "node_modules", "pkg"), 0o755)
	os.WriteFile(filepath.Join(h.repo, "node_modules", "pkg", "index.js"), []byte("module.exports = 1\n"), 0o644)
	os.MkdirAll(filepath.Join(h.repo, ".venv", "bin"), 0o755)
	os.WriteFile(filepath.Join(h.repo, ".venv", ".gitignore"), []byte("*\n"), 0o644)
	os.WriteFile(filepath.Join(h.repo, ".venv", "bin", "python"), []byte("#!/bin/sh\n"), 0o755)
	if got := testgit.Git(t, h.repo, "status", "--porcelain"); got != "" {
		t.Fatalf("the set-up left the work tree unclean: %q", got)
	}
	return h
}

// TestWorktreeLink: worktree_link puts a link to the work tree's folder in
// each worktree (sparse or not): the task reads the folder through it and
// what it installs lands in the shared folder; the link is never
// committed, by peal or by the agent's own `git add -A`, though the
// .gitignore pattern "node_modules/" does not match a link; removing the
// worktrees leaves the folder's contents alone, and info/exclude is as it
// was.
func TestWorktreeLink(t *testing.T) {
	t.Parallel()
	for _, sparse := range []string{"", "a"} {
		t.Run("sparse "+sparse, func(t *testing.T) {
			t.Parallel()
			h := linkHarness(t, parallelPlan("pp"))
			exclude, _ := os.ReadFile(filepath.Join(h.repo, ".git", "info", "exclude"))
			nm, venv := filepath.Join(h.repo, "node_modules"), filepath.Join(h.repo, ".venv")
			// A linked folder is the tasks' to write only when the user
			// says so (docs/behaviour.md, Confinement).
			h.writable = []string{nm}
			h.scenario(map[string][]fakes.Outcome{
				"execute:1": {{WriteFiles: map[string]string{"a/one.txt": "1"}, Commands: [][]string{
					{"sh", "-c", fmt.Sprintf("readlink node_modules > %[1]s/link-1; cat node_modules/pkg/index.js > %[1]s/seen-1; echo one > node_modules/from-1", h.agentDir)},
					{"sh", "-c", "echo agent > a/agent.txt && git add -A && git commit -q -m 'the agent commits itself'"},
				}}},
				"execute:2": {{WriteFiles: map[string]string{"a/two.txt": "2"}, Commands: [][]string{
					{"sh", "-c", fmt.Sprintf("readlink .venv > %[1]s/link-2; git status --porcelain --ignored > %[1]s/status-2", h.agentDir)},
				}}},
			})
			out, err := h.run("PEAL_MAX_PARALLEL=2", "PEAL_WORKTREE_LINK=node_modules,.venv", "PEAL_WORKTREE_SPARSE_PATHS="+sparse)
			if err != nil || !slices.Equal(out.Completed, []int{1, 2}) {
				t.Fatalf("err %v, outcome %+v\n%s", err, out, h.log.String())
			}
			if got := fileIn(t, h.agentDir, "link-1"); got != nm+"\n" {
				t.Errorf("node_modules in task 1's worktree links to %q, want %q", got, nm)
			}
			if got := fileIn(t, h.agentDir, "link-2"); got != venv+"\n" {
				t.Errorf(".venv in task 2's worktree links to %q, want %q", got, venv)
			}
			if got := fileIn(t, h.agentDir, "seen-1"); got != "module.exports = 1\n" {
				t.Errorf("task 1 read %q through the link", got)
			}
			// The links are ignored in the worktree, as the folders are in
			// the work tree.
			if got := fileIn(t, h.agentDir, "status-2"); !strings.Contains(got, "!! .venv\n") || !strings.Contains(got, "!! node_modules\n") {
				t.Errorf("git status --ignored in task 2's worktree: %q", got)
			}
			if got := fileIn(t, h.repo, "node_modules/from-1"); got != "one\n" {
				t.Errorf("what task 1 wrote into the shared folder: %q", got)
			}
			for _, f := range []string{"node_modules/pkg/index.js", ".venv/bin/python", ".venv/.gitignore"} {
				if _, err := os.Stat(filepath.Join(h.repo, f)); err != nil {
					t.Errorf("the shared %s is gone: %v", f, err)
				}
			}
			if got := testgit.Git(t, h.repo, "log", "--all", "--format=", "--name-only"); strings.Contains(got, "node_modules") || strings.Contains(got, ".venv") {
				t.Fatalf("a link was committed:\n%s", got)
			}
			// A confined agent's own git add and commit are refused
			// (docs/behaviour.md): its work is committed by peal.
			if !strings.Contains(testgit.Git(t, h.repo, "log", "--format=%s"), "the agent commits itself") && h.workDir() == h.repo {
				t.Fatal("the agent's own commit is not in the history")
			}
			if got := testgit.Git(t, h.repo, "log", "--format=", "--name-only"); !strings.Contains(got, "a/agent.txt") {
				t.Fatalf("the agent's file is not in the history:\n%s", got)
			}
			if got, _ := os.ReadFile(filepath.Join(h.repo, ".git", "info", "exclude")); string(got) != string(exclude) {
				t.Fatalf("info/exclude is %q, was %q", got, exclude)
			}
			if got := testgit.Git(t, h.repo, "status", "--porcelain"); got != "" {
				t.Fatalf("work tree not clean: %q", got)
			}
			if left := leftovers(t, h); len(left) > 0 {
				t.Fatalf("left behind: %q", left)
			}
		})
	}
}

// TestWorktreeLinkRefused: a worktree_link path the work tree does not
// have, or that git tracks, stops the run with one line before any agent
// call (at the start of the run, and at the start of a block when the path
// has gone meanwhile); a plan without a block never looks at it.
func TestWorktreeLinkRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ link, want string }{
		{"node_modules", "worktree_link node_modules: {repo}/node_modules does not exist in the work tree: make it there before the run"},
		{"a", "worktree_link a: git tracks a/f.txt: link only paths git ignores"},
		{"top.txt", "worktree_link top.txt: git tracks top.txt: link only paths git ignores"},
	} {
		h := sparseHarness(t, parallelPlan("pp"))
		_, err := h.run("PEAL_MAX_PARALLEL=2", "PEAL_WORKTREE_LINK="+tc.link)
		if want := strings.ReplaceAll(tc.want, "{repo}", h.repo); err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err %v, want %q", tc.link, err, want)
		}
		if calls := h.calls(); len(calls) != 0 {
			t.Errorf("%s: agent calls %q", tc.link, fakes.Keys(calls))
		}
		if left := leftovers(t, h); len(left) > 0 {
			t.Errorf("%s: left behind: %q", tc.link, left)
		}
	}

	t.Run("no block", func(t *testing.T) {
		h := sparseHarness(t, parallelPlan("ss"))
		if out, err := h.run("PEAL_MAX_PARALLEL=2", "PEAL_WORKTREE_LINK=node_modules"); err != nil || !slices.Equal(out.Completed, []int{1, 2}) {
			t.Fatalf("err %v, outcome %+v", err, out)
		}
	})
	t.Run("gone by the block", func(t *testing.T) {
		// Task 1, sequential, removes the folder the block's tasks link.
		h := linkHarness(t, parallelPlan("spp"))
		h.scenario(map[string][]fakes.Outcome{"execute:1": {{Commands: [][]string{{"rm", "-r", "node_modules"}}}}})
		out, err := h.run("PEAL_MAX_PARALLEL=2", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true", "PEAL_WORKTREE_LINK=node_modules")
		if err != nil || !slices.Equal(out.Completed, []int{1}) || !slices.Equal(out.Failed, []int{2, 3}) {
			t.Fatalf("err %v, outcome %+v\n%s", err, out, h.log.String())
		}
		if got := h.keys(); got != "plan:1 execute:1" {
			t.Fatalf("agent calls %q", got)
		}
		want := fmt.Sprintf(`msg="no task of the block can start" err="worktree_link node_modules: %s/node_modules does not exist in the work tree`, h.repo)
		if log := h.log.String(); strings.Count(log, want) != 1 {
			t.Fatalf("no %q (once) in the log:\n%s", want, log)
		}
		if left := leftovers(t, h); len(left) > 0 {
			t.Fatalf("left behind: %q", left)
		}
	})
}

// withDisk makes the run see free the free space where its worktrees go.
func withDisk(free func(dir string) (worktree.Space, error)) Option {
	return func(s *settings) { s.disk = free }
}

// TestWorktreeDiskCheck: before a block, the space a worktree takes is
// weighed against the free space of the file system of the worktrees (stet
// adds none: its sessions start where the task's worktree does, and it
// checks nothing out): the block runs as many tasks at once as fit, a
// task's worktree gone before the next starts, and none when not even one
// fits: then every task fails with one line before any agent call, leaving
// nothing behind. A sparse worktree is weighed by its set.
func TestWorktreeDiskCheck(t *testing.T) {
	t.Parallel()
	sizeOf := func(t *testing.T, h *harness, sparse ...string) worktree.Size {
		head := testgit.Git(t, h.repo, "rev-parse", "HEAD")
		size, err := h.trees(sparse...).Size(context.Background(), head, 4096)
		if err != nil {
			t.Fatal(err)
		}
		return size
	}
	for _, tc := range []struct {
		name   string
		stet   bool
		sparse string
		// free space in worktrees of the full tree (bytes beyond the
		// reserve, files) for a block of 3 on 3 slots
		bytes, files float64
		atOnce       int // 0: none fits
	}{
		{name: "all fit", bytes: 3, atOnce: 3},
		{name: "room for two", bytes: 2.5, atOnce: 2},
		{name: "room for one", bytes: 1.5, atOnce: 1},
		{name: "files for one", bytes: 10, files: 1.5, atOnce: 1},
		{name: "with stet", stet: true, bytes: 2.5, atOnce: 2},
		{name: "none fits", bytes: 0.8},
		{name: "sparse fits", sparse: "a", bytes: 1.5, atOnce: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := sparseHarness(t, parallelPlan("ppp"))
			full, size := sizeOf(t, h), sizeOf(t, h, tc.sparse)
			if tc.sparse != "" && size.Bytes*3 > full.Bytes*3/2 {
				t.Fatalf("the sparse worktree (%d bytes) is not smaller than the full one (%d)", size.Bytes, full.Bytes)
			}
			var asked []string
			disk := withDisk(func(dir string) (worktree.Space, error) {
				asked = append(asked, dir)
				space := worktree.Space{Free: worktree.Reserve + uint64(tc.bytes*float64(full.Bytes)), Block: 4096}
				if tc.files > 0 {
					space.Files = uint64(tc.files * float64(full.Files))
				}
				return space, nil
			})
			// Each task checks, at its start, which worktrees exist.
			seen := map[int][]string{}
			start := withTaskStart(func(task plan.Task) {
				entries, _ := os.ReadDir(filepath.Join(h.stateDir, worktree.Folder))
				for _, e := range entries {
					if !strings.HasSuffix(e.Name(), ".review") {
						seen[task.Index] = append(seen[task.Index], e.Name())
					}
				}
			})
			env := []string{"PEAL_MAX_PARALLEL=3", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true", "PEAL_WORKTREE_SPARSE_PATHS=" + tc.sparse}
			if tc.stet {
				env = append(env, h.withStet(fakes.StetScenario{})...)
			}
			out, err := h.runCfg(h.config(env...), disk, start)
			if err != nil {
				t.Fatal(err)
			}
			log := h.log.String()
			// The worktrees folder is made with the first worktree: until
			// then, its state folder is asked.
			if want := []string{h.stateDir}; !slices.Equal(asked, want) {
				t.Fatalf("free space asked of %q, want %q", asked, want)
			}
			if tc.atOnce == 0 {
				if len(out.Completed) != 0 || !slices.Equal(out.Failed, []int{1, 2, 3}) || len(h.calls()) != 0 {
					t.Fatalf("outcome %+v, calls %q", out, h.keys())
				}
				want := fmt.Sprintf(`msg="no task of the block can start" err="not enough disk space for one task's worktree in %s: a worktree takes about `, h.stateDir)
				if strings.Count(log, want) != 1 {
					t.Fatalf("no %q (once) in the log:\n%s", want, log)
				}
			} else if !slices.Equal(out.Completed, []int{1, 2, 3}) {
				t.Fatalf("outcome %+v\n%s", out, log)
			}
			warned := fmt.Sprintf(`msg="not enough disk space for every task of the block at once: fewer run at a time" at_once=%d would_run=3`, tc.atOnce)
			if got := strings.Contains(log, warned); got != (tc.atOnce > 0 && tc.atOnce < 3) {
				t.Fatalf("warning %q in the log: %v\n%s", warned, got, log)
			}
			if tc.atOnce == 1 {
				// One at a time: each task's worktree is the only one.
				for task := 1; task <= 3; task++ {
					if want := []string{fmt.Sprintf("task-%d", task)}; !slices.Equal(seen[task], want) {
						t.Errorf("worktrees at task %d's start: %q, want %q", task, seen[task], want)
					}
				}
			}
			if left := leftovers(t, h); len(left) > 0 {
				t.Fatalf("left behind: %q", left)
			}
		})
	}
}

// TestWorktreeSparseLeftoversSwept: a sparse worktree with its links and
// the run's section of info/exclude, as a run killed in a block leaves
// them, are removed by the next run, the linked folder's contents
// untouched.
func TestWorktreeSparseLeftoversSwept(t *testing.T) {
	t.Parallel()
	h := linkHarness(t, parallelPlan("pp"))
	ctx := context.Background()
	ts := h.trees("a")
	head := testgit.Git(t, h.repo, "rev-parse", "HEAD")
	if err := ts.Exclude(ctx, []string{"node_modules"}); err != nil {
		t.Fatal(err)
	}
	for task := 1; task <= 2; task++ {
		tt, err := ts.Add(ctx, task, head)
		if err != nil {
			t.Fatal(err)
		}
		if err := ts.Prepare(tt, nil, []string{"node_modules"}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(tt.Path, "b")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the sparse worktree holds b: %v", err)
		}
	}
	if len(leftovers(t, h)) < 5 {
		t.Fatalf("the set-up left too little to sweep: %q", leftovers(t, h))
	}
	h.scenario(map[string][]fakes.Outcome{"execute:1": {writes("a/one.txt", "1")}, "execute:2": {writes("a/two.txt", "2")}})
	out, err := h.run("PEAL_MAX_PARALLEL=2")
	if err != nil || !slices.Equal(out.Completed, []int{1, 2}) {
		t.Fatalf("err %v, outcome %+v\n%s", err, out, h.log.String())
	}
	if left := leftovers(t, h); len(left) > 0 {
		t.Fatalf("left behind: %q", left)
	}
	if got := fileIn(t, h.repo, "node_modules/pkg/index.js"); got != "module.exports = 1\n" {
		t.Fatalf("the linked folder lost its contents: %q", got)
	}
	if entries, _ := os.ReadDir(filepath.Join(h.repo, ".git", "worktrees")); len(entries) != 0 {
		t.Fatalf("git's records of worktrees are left: %v", entries)
	}
	fullCheckout(t, h)
}

// TestWorktreeSparseInterrupted: a signal in a block of sparse, linked
// worktrees leaves none of them, nor the block's section of info/exclude,
// and the re-run completes the rest.
func TestWorktreeSparseInterrupted(t *testing.T) {
	t.Parallel()
	h := linkHarness(t, parallelPlan("pp"))
	ready := readyPipe(t)
	h.scenario(map[string][]fakes.Outcome{
		"execute:1": {writes("a/one.txt", "1")},
		"execute:2": {{WriteFiles: map[string]string{ready: "x", "a/two.txt": "2"}, Hang: true}},
	})
	env := []string{"PEAL_MAX_PARALLEL=2", "PEAL_WORKTREE_SPARSE_PATHS=a", "PEAL_WORKTREE_LINK=node_modules"}
	r := startRun(h, env...)
	waitReady(t, ready)
	if !strings.Contains(fileIn(t, h.repo, ".git/info/exclude"), "\n/node_modules\n") {
		t.Fatalf("info/exclude during the block: %q", fileIn(t, h.repo, ".git/info/exclude"))
	}
	r.cancel(errors.New("SIGINT"))
	if _, err := r.wait(t); !isInterrupted(err) {
		t.Fatalf("err = %v", err)
	}
	if left := leftovers(t, h); len(left) > 0 {
		t.Fatalf("left behind: %q", left)
	}
	if got := fileIn(t, h.repo, "node_modules/pkg/index.js"); got != "module.exports = 1\n" {
		t.Fatalf("the linked folder lost its contents: %q", got)
	}
	h.scenario(nil)
	if out, err := h.run(env...); err != nil || len(out.Failed) != 0 || !slices.Equal(h.state().CompletedTaskIndices, []int{1, 2}) {
		t.Fatalf("re-run: err %v, outcome %+v", err, out)
	}
	if left := leftovers(t, h); len(left) > 0 {
		t.Fatalf("left behind after the re-run: %q", left)
	}
	fullCheckout(t, h)
}

// TestWorktreeStatusSparse: peal status reports the folders a sparse
// worktree that exists now checks out, read from its git folder.
func TestWorktreeStatusSparse(t *testing.T) {
	t.Parallel()
	h := sparseHarness(t, parallelPlan("pp"))
	if _, err := h.trees("c", "a/sub", "b").Add(context.Background(), 1, testgit.Git(t, h.repo, "rev-parse", "HEAD")); err != nil {
		t.Fatal(err)
	}
	st, _, err := report.Status(h.config())
	if err != nil || len(st.Tasks) != 2 {
		t.Fatalf("status %+v, %v", st, err)
	}
	if ws := st.Tasks[0].Worktree; ws == nil || !ws.Now || !slices.Equal(ws.Sparse, []string{"a/sub", "b", "c"}) {
		t.Fatalf("status %+v", ws)
	}
	if ws := st.Tasks[1].Worktree; ws != nil {
		t.Fatalf("task 2: %+v", ws)
	}
}
