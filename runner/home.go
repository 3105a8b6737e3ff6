package runner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"peal/internal/gitrepo"
	"peal/worktree"
)

// When the kernel confines files, the run's tasks (those not in a worktree
// of a parallel block) and its checks do not work in the work tree itself:
// a call could be kept out of its .git only by refusing it the work tree's
// top folder (nothing could be made or removed there). They work in the
// run's worktree, a mirror of the work tree whose work comes back to it as
// each task ends, as it would have been left there (worktree.Mirror). The
// run decides when: the mirror is made when a task or a check first needs
// it, mirrored again after a block's merges moved the work tree, and its
// work brought back after every task that worked there and at the end of
// the run.

// atHome is the site where the run's tasks (those not in a worktree of a
// parallel block) and its checks work, ready for them: the work tree, or,
// where the kernel confines files, the run's worktree, made or mirrored
// now when it must be.
func (r *run) atHome(ctx context.Context) (*site, error) {
	if !r.confined.Files() {
		return r.main, nil
	}
	if r.mirror == nil {
		// The site is made once the worktree is there: its git names the
		// worktree's git folder, read from it now.
		var at *site
		gitOf := func(t *worktree.Tree) *gitrepo.Repo {
			at = r.homeSite(t)
			return at.git
		}
		m, err := r.trees.OpenMirror(ctx, gitOf, r.main.commits, filepath.Join(r.cfg.StateDir, "tmp"),
			[]string{r.cfg.StateDir, r.cfg.KnowledgeDir, r.cfg.AgentLogDir})
		if err != nil {
			return nil, err
		}
		r.mirror, r.home = m, at
		r.guard.Add(m.Tree.Path, m.Tree.Dir)
		r.log.Info("the run's tasks work in a worktree of their own; their work comes back to the work tree as each ends", "worktree", m.Tree.Path,
			"branch", m.Tree.Branch, "linked_from_the_work_tree", len(m.Linked))
	}
	if err := r.mirror.Use(ctx); err != nil {
		return nil, err
	}
	r.home.writable = linkedWritable(r.main.tree, r.mirror.Linked)
	return r.home, nil
}

// homeMoved notes that the work tree moved (a block's merge, or its
// undoing): the run's worktree is mirrored again before its next use.
func (r *run) homeMoved() {
	if r.mirror != nil {
		r.mirror.Moved()
	}
}

// homeSite is the site of the run's worktree t: the work tree's, moved.
func (r *run) homeSite(t *worktree.Tree) *site {
	caller := r.caller
	caller.Dir = t.Dir
	at := &site{caller: caller, tree: t.Path, main: r.main.tree, git: r.main.git.In(caller, t.Path, t.Dir, false), commits: r.main.commits}
	at.reviewer = r.main.reviewer.Moved(caller, at.git, r.agents.At(r.callSite(at)), r.trees.Lock())
	return at
}

// linkedWritable are the entries of the work tree tree that linked (relative,
// a folder's with a trailing /) name: the run's worktree's calls write
// them through their links.
func linkedWritable(tree string, linked []string) []string {
	out := make([]string, len(linked))
	for i, p := range linked {
		out[i] = filepath.Join(tree, filepath.FromSlash(strings.TrimSuffix(p, "/")))
	}
	return out
}

// bringBack brings into the work tree what was done in the run's worktree
// since its work last came back: after each task that worked there, and at
// the end of the run. Work the work tree cannot take is kept on a branch,
// which the error names, and the run's worktree is made again for the
// next task.
func (r *run) bringBack(ctx context.Context) error {
	if r.mirror == nil {
		return nil
	}
	cctx, cancel := r.trees.CleanupContext(ctx)
	defer cancel()
	err := r.mirror.Bring(cctx)
	if err == nil {
		return nil
	}
	// The worktree goes: peal's git no longer watches its .git file.
	r.guard.Forget(r.mirror.Tree.Path)
	kept, kerr := r.mirror.Keep(cctx)
	r.mirror, r.home = nil, r.main
	if kerr != nil {
		return fmt.Errorf("%w; keeping the run's work on a branch failed too: %v", err, kerr)
	}
	if be := (*worktree.BringError)(nil); errors.As(err, &be) && be.Edited {
		// A path the person changed meanwhile: what to do next.
		return fmt.Errorf("%w; the run's work is kept on branch %s: commit or stash your change of %s, then take the run's work with git merge %s (or run peal again)",
			err, kept, be.Path, kept)
	}
	return fmt.Errorf("%w; the run's work is kept on branch %s", err, kept)
}

// leaveHome ends the run's use of its worktree, whatever ended the run:
// what was done there since it last came back comes to the work tree. The
// worktree stays for the next run. The error is the work tree's refusal of
// that work (kept on a branch).
func (r *run) leaveHome(ctx context.Context) error {
	err := r.bringBack(ctx)
	if r.mirror != nil {
		r.guard.Forget(r.mirror.Tree.Path)
		r.mirror.Close()
	}
	r.mirror, r.home = nil, r.main
	return err
}
