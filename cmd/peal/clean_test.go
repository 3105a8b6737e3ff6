package main

import (
	"strings"
	"testing"

	"peal/internal/testkit/testgit"
	"peal/state"
)

// TestCleanAndStatus: after a run without stet, status says that nothing
// was committed and names the run's worktree (where the kernel confines
// files) and `peal clean`; clean refuses while a run holds the state
// folder and removes nothing then; once the folder is free it removes the
// worktree and its branch, and leaves the task's uncommitted work in the
// work tree.
func TestCleanAndStatus(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nA\n")
	s.scenario(nil)
	env := append(s.env(), testgit.Env...)
	s.git(env, "commit", "-q", "--allow-empty", "-m", "root")
	if r := s.peal(env, "run"); r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	work := testgit.Git(t, s.repo, "status", "--porcelain")
	confined := s.workDir() != s.repo
	st := s.peal(env, "status")
	if !strings.Contains(st.stdout, "commits: none: runs of this configuration review nothing") ||
		confined != strings.Contains(st.stdout, "run's worktree: "+s.workDir()+" on branch peal-") ||
		confined != strings.Contains(st.stdout, "`peal clean` removes it") {
		t.Fatalf("status (confined %v):\n%s", confined, st.stdout)
	}

	release, err := state.LockFolder(s.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	r := s.peal(env, "clean")
	release()
	if r.code != 1 || !strings.Contains(r.stderr, "is in use by a peal run") || r.stdout != "" {
		t.Fatalf("clean while a run holds the folder: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := pealBranches(t, s.repo); confined != (got != "") {
		t.Fatalf("branches after a refused clean: %q", got)
	}

	r = s.peal(env, "clean")
	if r.code != 0 || confined != strings.Contains(r.stdout, "removed: "+s.workDir()+" and branch peal-") {
		t.Fatalf("clean: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := pealBranches(t, s.repo); got != "" {
		t.Fatalf("branches left: %q", got)
	}
	if got := testgit.Git(t, s.repo, "status", "--porcelain"); got != work {
		t.Fatalf("the work tree changed: %q, was %q", got, work)
	}
	if r := s.peal(env, "clean"); r.code != 0 || !strings.HasPrefix(r.stdout, "nothing to clean") {
		t.Fatalf("clean again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// pealBranches are the branches of peal's runs in repo (peal-<id>/…), one a
// line.
func pealBranches(t *testing.T, repo string) string {
	t.Helper()
	var ours []string
	for _, b := range strings.Split(testgit.Git(t, repo, "branch", "--format=%(refname:short)"), "\n") {
		if strings.HasPrefix(b, "peal-") && !strings.HasPrefix(b, "peal-kept/") {
			ours = append(ours, b)
		}
	}
	return strings.Join(ours, "\n")
}
