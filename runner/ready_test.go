package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"peal/internal/gitrepo"
	"peal/internal/safefs"
	"peal/internal/testkit/testbin"
	"peal/internal/testkit/testgit"
)

// TestRefusedBeforeTheFirstCall: what no agent call can fix stops the run
// before the first one, each with its own line and fix: an operation git is
// in the middle of (whether or not peal commits), and, where peal commits,
// a detached HEAD and a missing git identity; without commits those two do
// not matter, and the run goes on.
func TestRefusedBeforeTheFirstCall(t *testing.T) {
	t.Parallel()
	commit := "PEAL_COMMIT_AFTER_PHASE2=true"
	noIdentity := func(h *harness) {
		var env []string
		for _, kv := range h.env {
			if !strings.HasPrefix(kv, "GIT_AUTHOR_") && !strings.HasPrefix(kv, "GIT_COMMITTER_") && !strings.HasPrefix(kv, "GIT_CONFIG_") {
				env = append(env, kv)
			}
		}
		h.env = append(env, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=user.useConfigOnly", "GIT_CONFIG_VALUE_0=true")
	}
	cases := []struct {
		name    string
		set     func(t *testing.T, h *harness)
		env     []string
		refused string // "" : the run goes on
	}{
		{"rebase in progress", func(t *testing.T, h *harness) { os.MkdirAll(filepath.Join(h.repo, ".git", "rebase-merge"), 0o755) }, nil,
			"a rebase is in progress in REPO: finish it (git rebase --continue) or give it up (git rebase --abort), then run peal again"},
		{"merge in progress", func(t *testing.T, h *harness) {
			os.WriteFile(filepath.Join(h.repo, ".git", "MERGE_HEAD"), []byte(head(t, h)+"\n"), 0o644)
		}, nil,
			"a merge is in progress in REPO: finish it (resolve its conflicts, then git commit) or give it up (git merge --abort), then run peal again"},
		{"cherry-pick in progress", func(t *testing.T, h *harness) {
			os.WriteFile(filepath.Join(h.repo, ".git", "CHERRY_PICK_HEAD"), []byte(head(t, h)+"\n"), 0o644)
		}, nil, "a cherry-pick is in progress in REPO: finish it (git cherry-pick --continue) or give it up (git cherry-pick --abort), then run peal again"},
		{"detached HEAD, committing", func(t *testing.T, h *harness) { testgit.Git(t, h.repo, "checkout", "-q", "--detach") }, []string{commit},
			"HEAD of REPO is detached (at SHORT), and peal commits the tasks' work, which no branch would then hold: check a branch out (git switch BRANCH, or git switch -c NEW-BRANCH), then run peal again"},
		{"detached HEAD, nothing committed", func(t *testing.T, h *harness) { testgit.Git(t, h.repo, "checkout", "-q", "--detach") }, nil, ""},
		{"no identity, committing", func(t *testing.T, h *harness) { noIdentity(h) }, []string{commit},
			"git has no identity to commit as in REPO (fatal: no email was given and auto-detection is disabled): set one (git config user.name \"Your Name\" and git config user.email you@example.com, in the repository or with --global), then run peal again"},
		{"no identity, nothing committed", func(t *testing.T, h *harness) { noIdentity(h) }, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "## Task 1\nA\n")
			testgit.Git(t, h.repo, "commit", "-q", "--allow-empty", "-m", "first")
			tc.set(t, h)
			short := ""
			if strings.Contains(tc.refused, "SHORT") {
				short = head(t, h)[:12]
			}
			_, err := h.run(tc.env...)
			if tc.refused == "" {
				if err != nil || h.keys() != "plan:1 execute:1" {
					t.Fatalf("run: %v, calls %q", err, h.keys())
				}
				return
			}
			want := strings.NewReplacer("REPO", h.repo, "SHORT", short).Replace(tc.refused)
			var nr *gitrepo.NotReadyError
			if !errors.As(err, &nr) || err.Error() != want {
				t.Fatalf("run: %v\nwant %s", err, want)
			}
			if got := h.keys(); got != "" {
				t.Fatalf("calls %q before the refusal", got)
			}
		})
	}
}

func head(t *testing.T, h *harness) string { return testgit.Git(t, h.repo, "rev-parse", "HEAD") }

// TestFullDiskAtTheStart: a state folder on a full disk stops the run
// before its first call, with one line that says the disk is full and names
// the folder.
func TestFullDiskAtTheStart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "## Task 1\nA\n")
	full := filepath.Join(testbin.FullDisk(t), "state")
	_, err := h.run("PEAL_STATE_DIR=" + full)
	var fe *safefs.FullError
	want := "state folder " + full + " (state_dir): the disk holding " + full + " is full (no space left on device): free space there, then run peal again"
	if !errors.As(err, &fe) || err.Error() != want {
		t.Fatalf("run: %v\nwant %s", err, want)
	}
	if got := h.keys(); got != "" {
		t.Fatalf("calls %q", got)
	}
}
