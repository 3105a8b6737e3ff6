package runner

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"peal/confine"
	"peal/internal/fakes"
	"peal/internal/testgit"
)

// unenforced confines a run as a machine whose kernel confines no files
// would.
func unenforced() Option { return func(s *settings) { s.unenforced = true } }

// TestGuardRefusesWhatACallPlanted: where the kernel does not confine
// files, a hook planted by an agent call stops the run before peal's next
// git command (here the commit after the execute), with one line naming
// it, even under continue_with_remaining_tasks; a hook that was there
// before the run is honoured as always.
func TestGuardRefusesWhatACallPlanted(t *testing.T) {
	t.Parallel()
	for _, planted := range []bool{true, false} {
		h := newHarness(t, twoTasks)
		h.confine = "auto"
		hooks := filepath.Join(h.repo, ".git", "hooks")
		os.MkdirAll(hooks, 0o755)
		// A hook of the user's, there before the run: it runs at every commit.
		if err := os.WriteFile(filepath.Join(hooks, "post-commit"), []byte("#!/bin/sh\necho >> ran.log\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		testgit.Git(t, h.repo, "commit", "-q", "--allow-empty", "-m", "root")
		os.Remove(filepath.Join(h.repo, "ran.log"))
		out := writes("one.txt", "1")
		if planted {
			out = writes("one.txt", "1", ".git/hooks/post-merge", "#!/bin/sh\ntouch pwned\n")
		}
		h.scenario(map[string][]fakes.Outcome{"execute:1": {out}})
		got, err := h.runCfg(h.config("PEAL_COMMIT_AFTER_PHASE2=true", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true"), unenforced())
		if !planted {
			if err != nil || !slices.Equal(got.Completed, []int{1, 2}) {
				t.Fatalf("no hook planted: err %v, outcome %+v", err, got)
			}
			if log, _ := os.ReadFile(filepath.Join(h.repo, "ran.log")); strings.Count(string(log), "\n") != 2 {
				t.Fatalf("the user's hook ran %q times, want at each of the two commits", log)
			}
			continue
		}
		want := filepath.Join(hooks) + " was changed since the run started (an agent call or a check can write it): peal runs no git and no stet after that"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err %v, want %q\n%s", err, want, h.log.String())
		}
		if keys := h.keys(); keys != "plan:1 execute:1" {
			t.Fatalf("the run went on after the refusal: %s", keys)
		}
		if _, err := os.Stat(filepath.Join(h.repo, "pwned")); err == nil {
			t.Fatal("the planted hook ran")
		}
	}
}

// TestConfineOnRefusesToStart: confine = on on a machine that cannot
// confine files is one line naming the key and why, before anything runs;
// auto goes on, and says what it cannot enforce.
func TestConfineOnRefusesToStart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, twoTasks)
	none := confine.Support{Why: "Landlock is not enabled in this kernel"}
	_, err := confinementOn(h.config("PEAL_CONFINE=on"), nil, none)
	want := "confine = on (set by PEAL_CONFINE), but this machine cannot confine files: Landlock is not enabled in this kernel; set confine = auto to run with what it can enforce, or off"
	if err == nil || err.Error() != want {
		t.Fatalf("err %v\nwant %s", err, want)
	}
	c, err := confinementOn(h.config("PEAL_CONFINE=auto"), nil, none)
	if err != nil || c.files() || !strings.Contains(c.line(), "not enforced: Landlock is not enabled in this kernel") {
		t.Fatalf("auto: %v, %+v", err, c)
	}
}
