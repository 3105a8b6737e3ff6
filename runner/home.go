package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"peal/internal/gitrepo"
)

// When the kernel confines files, the run's tasks do not work in the work
// tree itself: a call could be kept out of its .git only by refusing it
// the work tree's top folder (nothing could be made or removed there).
// They work in the run's worktree (its home, see worktree.Set.AddHome): the
// work tree's HEAD checked out, what git ignores in the work tree linked
// into it. peal commits every task's work there (a worktree's work travels
// as commits), and brings it back to the work tree as each task completes
// and at the end of the run:
//   - when the run commits (stet, commit_after_phase2), as commits:
//     the work tree fast-forwards; work never committed (a task cut short)
//     is kept on a branch, never brought into the work tree;
//   - otherwise as changes the work tree does not commit, as an
//     unconfined run leaves them: each task's diff is applied there, and
//     the run's worktree commits under an identity of its own
//     (peal <peal@localhost>) that never reaches the work tree's history.
//     Its first commit is what the work tree held and did not commit when
//     the run started, so that the tasks work on it as in the work tree.

// moveHome makes the run's worktree and makes it the home of the run's
// tasks, before the first agent call of a task. A repository without a
// commit keeps its tasks in the work tree (one warning: what a confined
// call cannot do there).
func (r *run) moveHome(ctx context.Context) error {
	main := r.home
	head, err := main.git.Head(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		r.log.Warn("the repository has no commit yet, so its tasks work in the work tree itself, where a confined call cannot make, remove or rename anything directly in the top folder (beside .git): make a first commit to have them work in a worktree of the run")
		return nil
	}
	brought, resumed := r.trees.LeftHome()
	changes, err := main.git.Changes(ctx)
	if err != nil {
		return err
	}
	if len(changes) > 0 && main.commits {
		// (A run that does not commit works on the work tree's changes:
		// they go into its worktree below.)
		r.log.Warn("the work tree has changes git does not hold ("+gitrepo.ListPaths(changes, 3)+"): confined tasks work in a worktree of the run made from HEAD, which does not have them; commit them to let the tasks see them",
			"paths", len(changes))
	}
	t, linked, err := r.trees.AddHome(ctx, head, []string{r.cfg.StateDir, r.cfg.KnowledgeDir, r.cfg.AgentLogDir})
	if err != nil {
		return fmt.Errorf("making the run's worktree for confined tasks: %w", err)
	}
	caller := r.caller
	caller.Dir = t.Dir
	at := &site{caller: caller, tree: t.Path, main: main.tree, git: main.git.In(caller, t.Dir, false), commits: true}
	if !main.commits {
		at.git.Identity("peal", "peal@localhost")
	}
	r.brought = head
	if resumed && brought != "" && !main.commits {
		r.brought = brought
	}
	if !main.commits && !resumed && len(changes) > 0 {
		// As in the work tree itself, the tasks work on the changes the
		// work tree does not commit (its own, an earlier run's): they
		// are the worktree's first commit, which the work tree holds.
		if r.brought, err = r.seedHome(ctx, at.git); err != nil {
			return fmt.Errorf("bringing the work tree's uncommitted changes into the run's worktree: %w", err)
		}
		r.log.Info("the work tree's uncommitted changes are in the run's worktree too", "paths", len(changes))
	}
	if !main.commits {
		if err := r.trees.NoteBrought(r.brought); err != nil {
			return err
		}
	}
	for _, p := range linked {
		at.writable = append(at.writable, filepath.Join(main.tree, filepath.FromSlash(strings.TrimSuffix(p, "/"))))
	}
	at.reviewer = main.reviewer.InWorkTree(caller, at.git, phase3Agent{r, at}, t.Review, r.trees.Lock())
	if resumed && at.reviewer.Builtin() {
		// The review session the run that died left open there is closed,
		// as the work tree's would be.
		if err := at.reviewer.Open(ctx); err != nil {
			return err
		}
	}
	r.guard.Add(t.Path, t.Dir)
	r.main, r.home = main, at
	r.trees.Into(at.git)
	r.log.Info("the run's tasks work in a worktree of their own; each completed task's work comes back to the work tree", "worktree", t.Path,
		"branch", t.Branch, "linked_from_the_work_tree", len(linked))
	return nil
}

// seedHome commits in the run's worktree (at the work tree's HEAD) what
// the work tree holds and does not commit, and returns that commit.
func (r *run) seedHome(ctx context.Context, home *gitrepo.Repo) (string, error) {
	tmp := filepath.Join(r.cfg.StateDir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return "", err
	}
	index, err := os.CreateTemp(tmp, "snapshot-index-")
	if err != nil {
		return "", err
	}
	index.Close()
	defer os.Remove(index.Name())
	tree, err := r.home.git.Snapshot(ctx, index.Name())
	if err != nil {
		return "", err
	}
	if err := home.CheckOutTree(ctx, tree); err != nil {
		return "", err
	}
	if _, err := home.CommitMessage(ctx, "peal: the work tree's uncommitted changes when the run started"); err != nil {
		return "", err
	}
	return home.Head(ctx)
}

// bringBack brings what the run's worktree committed into the work tree:
// fast-forward, or as uncommitted changes when the run does not commit;
// nothing when the tasks work in the work tree.
func (r *run) bringBack(ctx context.Context) error {
	if r.main == nil {
		return nil
	}
	cctx, cancel := r.trees.CleanupContext(ctx)
	defer cancel()
	if !r.main.commits {
		return r.refused(r.applyBack(cctx))
	}
	moved, err := r.trees.FastForward(cctx)
	if moved {
		r.log.Info("the work tree took the run's work", "branch", r.trees.Home().Branch)
	}
	return r.refused(err)
}

// refusedError is the work tree's refusal of the run's work. The branch
// that keeps the work is named once the run's worktree is gone and the
// branch has its last name (keptHome), so that the line a run ends with
// never names a branch that is no more.
type refusedError struct {
	err error
	r   *run
}

func (e *refusedError) Error() string {
	if kept := e.r.keptHome; kept != "" {
		return e.err.Error() + "; the run's work is kept on branch " + kept
	}
	return e.err.Error()
}

func (e *refusedError) Unwrap() error { return e.err }

// refused is err as the work tree's refusal of the run's work; nil for nil.
func (r *run) refused(err error) error {
	if err == nil {
		return nil
	}
	return &refusedError{err: err, r: r}
}

// applyBack applies to the work tree, uncommitted, what the run's worktree
// committed since it last did.
func (r *run) applyBack(ctx context.Context) error {
	to, err := r.home.git.Head(ctx)
	if err != nil || to == r.brought {
		return err
	}
	var patch bytes.Buffer
	if _, err := r.home.git.Command("diff", "--binary", "--no-color", "--no-ext-diff", "--no-renames", r.brought, to).StreamTo(&patch).Run(ctx); err != nil {
		return err
	}
	if patch.Len() > 0 {
		if _, err := r.main.git.Command("apply", "--whitespace=nowarn").Stdin(patch.Bytes()).Run(ctx); err != nil {
			return fmt.Errorf("the work tree cannot take the run's work as changes (its own changes touch the same lines?): %w", err)
		}
		r.log.Info("the work tree took the run's work, uncommitted", "from", r.brought, "to", to)
	}
	r.brought = to
	return r.trees.NoteBrought(to)
}

// leaveHome ends the run's worktree, whatever ended the run: what was
// committed there comes back to the work tree, what was not is committed
// on its branch, which is then kept; the worktree goes. The error is the
// work tree's refusal of the run's work (which stays on the branch).
func (r *run) leaveHome(ctx context.Context) (back error) {
	if r.main == nil {
		return nil
	}
	cctx, cancel := r.trees.CleanupContext(ctx)
	defer cancel()
	if back = r.bringBack(cctx); back != nil {
		r.log.Error("the work tree could not take the run's work; it stays on its branch", "err", back)
	}
	if changes, err := r.home.git.Changes(cctx); err == nil && len(changes) > 0 {
		if _, err := r.home.git.CommitMessage(cctx, "peal: unfinished work (not brought into the work tree)"); err != nil {
			r.log.Warn("could not commit the unfinished work of the run's worktree; it is lost with the worktree", "paths", gitrepo.ListPaths(changes, 3), "err", err)
		}
	}
	if !r.main.commits {
		// Without commits, unfinished work comes back too, uncommitted,
		// as an unconfined run leaves it.
		if err := r.applyBack(cctx); err != nil {
			r.log.Error("the work tree could not take the run's unfinished work; it stays on its branch", "err", err)
		}
	}
	r.guard.Forget(r.home.tree)
	kept, err := r.trees.DropHome(cctx, r.main.commits || r.brought != r.headOrEmpty(cctx))
	if err != nil {
		r.log.Warn("could not remove the run's worktree; the next run removes it", "err", err)
	}
	if kept != "" {
		r.log.Warn("work of the run's worktree that did not reach the work tree is kept on a branch (an unfinished task's, or what the work tree refused)", "branch", kept)
		r.keptHome = kept
	}
	r.home, r.main = r.main, nil
	r.trees.Into(nil)
	return back
}

// headOrEmpty is the run's worktree's HEAD, "" when it cannot be read.
func (r *run) headOrEmpty(ctx context.Context) string {
	h, _ := r.home.git.Head(ctx)
	return h
}
