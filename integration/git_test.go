package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"peal/internal/testkit/mockllm"
)

// TestPealConfinedNestedRepository: each real CLI's shell tool makes sub/
// a repository of its own, with a commit, names a program of its as its
// file system monitor and leaves a file there changed, beside the task's
// own work; peal commits the work (commit_after_phase2). The program never
// runs (it would leave a file outside every tree): the task fails in one
// line naming sub/ and the branch its work is kept on, which holds the
// task's file and sub's, and the user's branch does not move.
func TestPealConfinedNestedRepository(t *testing.T) {
	t.Parallel()
	eachAgent(t, func(t *testing.T, a agent) {
		var ran string
		w := newConfineWorld(t, a, "on", worldOptions{}, func(w *confineWorld) mockllm.Script {
			ran = filepath.Join(w.root, "fsmonitor-ran")
			script := "set -e\n" + legitWork("hello.txt") + "\ngit init -q sub\ncd sub\necho a > f\ngit add f\n" +
				"git -c user.name=agent -c user.email=agent@example.invalid commit -q -m agent\n" +
				"printf '#!/bin/sh\\necho ran >> " + ran + "\\n' > .git/fsmonitor\nchmod +x .git/fsmonitor\n" +
				"git config core.fsmonitor \"$PWD/.git/fsmonitor\"\necho b > f\necho NESTED-OK\n"
			return escapeTask(piped(script, "bash"))
		})
		writeFile(t, w.plan, "# Plan\n\n## Task 1\n\nCreate hello.txt with a greeting.\n")
		head := gitIn(t, w.sb.repo, w.sb.base, "rev-parse", "HEAD")
		r := w.run(t, "--commit-after-phase2")
		if _, err := os.Stat(ran); err == nil {
			t.Fatalf("the nested repository's monitor ran\n%s", w)
		}
		last := r.stderr[strings.LastIndex(strings.TrimRight(r.stderr, "\n"), "\n")+1:]
		if r.code != 1 || !strings.Contains(last, "a git repository that a call made (sub/, with its own .git)") ||
			!strings.Contains(last, "its work is kept on branch peal-kept/task-1-") {
			t.Fatalf("last line %q\n%s", last, w)
		}
		kept := strings.Fields(gitIn(t, w.sb.repo, w.sb.base, "for-each-ref", "--format=%(refname:short)", "refs/heads/peal-kept/"))
		if len(kept) != 1 {
			t.Fatalf("kept branches %q", kept)
		}
		if got := gitIn(t, w.sb.repo, w.sb.base, "show", kept[0]+":sub/f"); got != "b" {
			t.Errorf("the kept sub/f: %q", got)
		}
		if got := gitIn(t, w.sb.repo, w.sb.base, "show", kept[0]+":hello.txt"); !strings.Contains(got, "hello") {
			t.Errorf("the kept hello.txt: %q", got)
		}
		if now := gitIn(t, w.sb.repo, w.sb.base, "rev-parse", "HEAD"); now != head {
			t.Errorf("the user's branch moved")
		}
	})
}
