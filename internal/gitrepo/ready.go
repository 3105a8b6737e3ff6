package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"peal/internal/safefs"
	"peal/internal/text"
)

// NotReadyError is a repository in a state that no agent call can change:
// what is wrong, and what the person does about it. A run refuses it
// before its first agent call.
type NotReadyError struct {
	What, Fix string
}

func (e *NotReadyError) Error() string { return e.What + ": " + e.Fix }

// inProgress are the operations git keeps a file or folder for in the
// work tree's git folder while they wait for the person, and how each is
// finished or given up.
var inProgress = []struct{ file, what, fix string }{
	{"rebase-merge", "a rebase is in progress", "finish it (git rebase --continue) or give it up (git rebase --abort)"},
	{"rebase-apply/applying", "git am is in progress", "finish it (git am --continue) or give it up (git am --abort)"},
	{"rebase-apply", "a rebase is in progress", "finish it (git rebase --continue) or give it up (git rebase --abort)"},
	{"MERGE_HEAD", "a merge is in progress", "finish it (resolve its conflicts, then git commit) or give it up (git merge --abort)"},
	{"CHERRY_PICK_HEAD", "a cherry-pick is in progress", "finish it (git cherry-pick --continue) or give it up (git cherry-pick --abort)"},
	{"REVERT_HEAD", "a revert is in progress", "finish it (git revert --continue) or give it up (git revert --abort)"},
	{"BISECT_LOG", "a bisect is in progress", "end it (git bisect reset)"},
}

// Ready checks what no agent call can fix, before the first one: an
// operation git is in the middle of (rebase, am, merge, cherry-pick,
// revert, bisect: its half-done files would be taken for the task's work),
// and, when peal will commit, a HEAD that is on no branch (its commits
// would be on none) and a git identity to commit as. A problem is a
// *NotReadyError. The Repo must be pinned (Pin).
func (g *Repo) Ready(ctx context.Context, commits bool) error {
	f, err := g.resolve(ctx)
	if err != nil {
		return err
	}
	for _, op := range inProgress {
		if _, err := os.Lstat(filepath.Join(f.gitDir, filepath.FromSlash(op.file))); err == nil {
			return &NotReadyError{What: fmt.Sprintf("%s in %s", op.what, f.top), Fix: op.fix + ", then run peal again"}
		}
	}
	if !commits {
		return nil
	}
	head, err := safefs.ReadFile(filepath.Join(f.gitDir, "HEAD"), 4096)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("reading HEAD of %s: %w", f.top, err)
	}
	if h := strings.TrimSpace(string(head)); err == nil && !strings.HasPrefix(h, "ref: ") {
		return &NotReadyError{What: fmt.Sprintf("HEAD of %s is detached (at %s), and peal commits the tasks' work, which no branch would then hold", f.top, text.Quote(h[:min(len(h), 12)])),
			Fix: "check a branch out (git switch BRANCH, or git switch -c NEW-BRANCH), then run peal again"}
	}
	if _, err := g.Command("var", "GIT_AUTHOR_IDENT").Run(ctx); err != nil {
		var ge *Error
		if errors.As(err, &ge) && ctx.Err() == nil {
			return &NotReadyError{What: fmt.Sprintf("git has no identity to commit as in %s (%s)", f.top, ge.Line),
				Fix: `set one (git config user.name "Your Name" and git config user.email you@example.com, in the repository or with --global), then run peal again`}
		}
		return err
	}
	return nil
}
