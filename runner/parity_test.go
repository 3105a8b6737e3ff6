package runner

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"peal/confine"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
	"peal/tickets"
)

// TestConfinedMatchesUnconfined: a run under confine = on (its tasks in
// the run's worktree) ends as the same run under off (its tasks in the
// work tree): the same exit, the same tasks completed, failed, skipped,
// the same tickets and attempts, the same agent calls with their models,
// the same review commands, and the same work tree (files, history,
// status), run after run. Each scenario is one the run's worktree could
// get wrong: a task blocked by its findings and run again (its review
// must keep the commit it started at), escalation up to a skip, a retry
// reset, a repository without a commit (with and without commits), a
// parallel block there, a work tree with changes of its own, a check that
// drives the address loop, a task's build output and a dependency folder
// removed.
func TestConfinedMatchesUnconfined(t *testing.T) {
	t.Parallel()
	if !confine.Probe().Files {
		t.Skip("this kernel does not confine files")
	}
	blocked := func(h *harness) []string {
		h.scenario(map[string][]fakes.Outcome{"execute": plants(twoFindings()...)})
		return append(h.withStet(fakes.StetScenario{}), "PEAL_MAX_ADDRESS_ROUNDS=1")
	}
	for _, tc := range []struct {
		name string
		plan string
		runs int
		// setup prepares the repository and the scenario, and returns the
		// variables of every run; between runs, before run i (from 1).
		setup   func(h *harness) []string
		between func(h *harness, i int) []string
		// must holds what every mode must show (beyond showing the same).
		must func(t *testing.T, runs []string)
	}{
		{name: "blocked, then run again", plan: "## Task 1\nA\n", runs: 2, setup: blocked,
			must: func(t *testing.T, runs []string) {
				for i, r := range runs {
					if !strings.HasPrefix(r, "exit 1 findings remaining") {
						t.Errorf("run %d: %s", i+1, r)
					}
				}
			}},
		{name: "escalation up to a skip", plan: "## Task 1\nA\n", runs: 3, setup: func(h *harness) []string {
			return append(blocked(h), "PEAL_MODEL=base", "PEAL_ESCALATION_ENABLED=true", "PEAL_ESCALATION_MAX_RETRIES=2", "PEAL_ESCALATION_FIXER=fixer-m")
		}, must: func(t *testing.T, runs []string) {
			if !strings.HasPrefix(runs[2], "exit 2  completed [] failed [] skipped [1]") {
				t.Errorf("third run: %s", runs[2])
			}
		}},
		{name: "retry reset", plan: "## Task 1\nA\n", runs: 2, setup: blocked, between: func(h *harness, i int) []string {
			// The findings are planted no more, and the first run's work is
			// kept on a branch, not in the tree: a fresh attempt completes.
			h.scenario(nil)
			return []string{"PEAL_RETRY_RESET=true"}
		}, must: func(t *testing.T, runs []string) {
			if !strings.HasPrefix(runs[1], "exit 0  completed [1]") {
				t.Errorf("second run: %s", runs[1])
			}
		}},
		{name: "no commit yet", plan: twoTasks, runs: 1, setup: func(h *harness) []string {
			os.WriteFile(filepath.Join(h.repo, "README.md"), []byte("mine\n"), 0o644)
			h.scenario(map[string][]fakes.Outcome{"execute:1": {writes("one.txt", "1")}, "execute:2": {writes("two.txt", "2", "README.md", "theirs\n")}})
			return nil
		}},
		{name: "no commit yet, commit_after_phase2", plan: twoTasks, runs: 1, setup: func(h *harness) []string {
			os.WriteFile(filepath.Join(h.repo, "README.md"), []byte("mine\n"), 0o644)
			h.scenario(map[string][]fakes.Outcome{"execute:1": {writes("one.txt", "1")}, "execute:2": {writes("two.txt", "2")}})
			return []string{"PEAL_COMMIT_AFTER_PHASE2=true"}
		}},
		{name: "no commit yet, a parallel block", plan: parallelPlan("pp"), runs: 1, setup: func(h *harness) []string {
			h.scenario(map[string][]fakes.Outcome{"execute:1": {writes("one.txt", "1")}, "execute:2": {writes("two.txt", "2")}})
			return []string{"PEAL_MAX_PARALLEL=2"}
		}},
		{name: "changes of the user's, commit_after_phase2", plan: twoTasks, runs: 1, setup: func(h *harness) []string {
			testgit.Git(t, h.repo, "commit", "-q", "--allow-empty", "-m", "root")
			os.WriteFile(filepath.Join(h.repo, "mine.txt"), []byte("mine\n"), 0o644)
			h.scenario(map[string][]fakes.Outcome{"execute:1": {writes("one.txt", "1")}, "execute:2": {{WriteFiles: map[string]string{"mine.txt": "ours\n"}, Exit: 1}}})
			return []string{"PEAL_COMMIT_AFTER_PHASE2=true", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true"}
		}},
		{name: "a check drives the address loop", plan: twoTasks, runs: 1, setup: func(h *harness) []string {
			h.scenario(map[string][]fakes.Outcome{"execute:1": {breaks}, "address": {fixesWhenShown}, "execute:2": {writes("two.txt", "2")}})
			return []string{checksEnv(statusCheck)}
		}},
		{name: "a build's output, a dependency folder removed", plan: twoTasks, runs: 1, setup: func(h *harness) []string {
			os.WriteFile(filepath.Join(h.repo, ".gitignore"), []byte("bin/\nnode_modules/\n"), 0o644)
			testgit.Git(t, h.repo, "add", ".gitignore")
			testgit.Git(t, h.repo, "commit", "-q", "-m", "root")
			os.MkdirAll(filepath.Join(h.repo, "node_modules", "pkg"), 0o755)
			os.WriteFile(filepath.Join(h.repo, "node_modules", "pkg", "index.js"), []byte("1\n"), 0o644)
			h.scenario(map[string][]fakes.Outcome{
				"execute:1": {{Commands: [][]string{{"sh", "-c", "mkdir -p bin && echo app > bin/app && rm -r node_modules"}}}},
				"execute:2": {{Commands: [][]string{{"sh", "-c", "ls bin node_modules > seen.txt 2>&1; true"}}}},
			})
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got [2][]string
			for m, mode := range []string{"off", "on"} {
				h := newHarness(t, tc.plan)
				h.confine = mode
				env := tc.setup(h)
				for i := range tc.runs {
					more := env
					if i > 0 && tc.between != nil {
						more = append(slices.Clone(env), tc.between(h, i)...)
					}
					before := len(h.calls())
					out, err := h.run(more...)
					got[m] = append(got[m], h.outcomeLine(out, err, before))
				}
				got[m] = append(got[m], h.tickets(), h.workTree())
				if tc.must != nil {
					tc.must(t, got[m][:tc.runs])
				}
			}
			for i := range got[0] {
				if got[0][i] != got[1][i] {
					t.Errorf("off and on differ:\noff: %s\non:  %s", got[0][i], got[1][i])
				}
			}
		})
	}
}

// hashes are commit and object ids, which differ between two runs of the
// same scenario (their commits' times).
var hashes = regexp.MustCompile(`\b[0-9a-f]{7,64}\b`)

// outcomeLine says how a run ended and what it called, in words that do
// not depend on where its tasks worked: the exit, the tasks, the agent's
// calls since the before-th with their models, and the review commands.
func (h *harness) outcomeLine(out Outcome, err error, before int) string {
	h.t.Helper()
	code, why := out.ExitCode, ""
	var stopped *StoppedError
	switch {
	case isFindingsRemaining(err):
		code, why = 1, "findings remaining"
	case errors.As(err, &stopped):
		code, why = 3, "stopped"
	case err != nil:
		code, why = 1, strings.NewReplacer(h.workDir(), "<tree>", h.repo, "<tree>").Replace(err.Error())
	}
	var calls []string
	for _, c := range h.calls()[before:] {
		calls = append(calls, c.Key+"@"+modelOf(c))
	}
	slices.Sort(calls) // a block's calls start in any order
	stet := ""
	if h.stetDir != "" {
		stet = h.stetCmds()
	}
	return hashes.ReplaceAllString(fmt.Sprintf("exit %d %s completed %v failed %v skipped %v deferred %v with findings %v; calls %s; stet %s",
		code, why, out.Completed, out.Failed, out.Skipped, out.Deferred, out.WithFindings, strings.Join(calls, " "), stet), "SHA")
}

// tickets are the attempts of every ticket of the run's store.
func (h *harness) tickets() string {
	h.t.Helper()
	dirs, _ := os.ReadDir(filepath.Join(h.knowledge(), "tickets"))
	var out []string
	for _, d := range dirs {
		st, err := tickets.Load(h.knowledge(), d.Name())
		if err != nil {
			h.t.Fatalf("retry state of %s: %v", d.Name(), err)
		}
		for _, a := range st.Attempts {
			counts := tickets.Counts{}
			if a.QualityGate != nil {
				counts = a.QualityGate.Counts
			}
			out = append(out, fmt.Sprintf("%s #%d %s %s %+v", d.Name(), a.AttemptNumber, a.Status, a.Trigger, counts))
		}
		out = append(out, fmt.Sprintf("%s: %s, %d retries", d.Name(), st.Status, st.RetryCount))
	}
	return "tickets: " + strings.Join(out, "; ")
}

// workTree is what the work tree holds: every file (a link as its target)
// but those of .git, its history's subjects and git's status.
func (h *harness) workTree() string {
	h.t.Helper()
	var files []string
	filepath.WalkDir(h.repo, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(h.repo, p)
		switch {
		case err != nil:
			return err
		case rel == ".git":
			return filepath.SkipDir
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			files = append(files, rel+" -> "+target)
		case d.Type().IsRegular():
			data, _ := os.ReadFile(p)
			files = append(files, fmt.Sprintf("%s %q", rel, data))
		}
		return nil
	})
	slices.SortFunc(files, cmp.Compare)
	log := ""
	if hasCommit(h.t, h.repo) {
		log = testgit.Git(h.t, h.repo, "log", "--format=%s %an", "--topo-order")
	}
	return fmt.Sprintf("files %s; log %q; status %q", strings.Join(files, ", "), log, testgit.Git(h.t, h.repo, "status", "--porcelain"))
}
