package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"peal/internal/gitrepo"
	"peal/worktree"
)

// When the kernel confines files, the run's tasks do not work in the work
// tree itself: a call could be kept out of its .git only by refusing it
// the work tree's top folder (nothing could be made or removed there).
// They work in the run's worktree (its home, see worktree.Set.AddHome),
// which mirrors the work tree: its HEAD, what the work tree holds
// uncommitted, and what git ignores there, linked. What a task does there
// comes back to the work tree as soon as it ends, completed or not, as it
// would be had it worked in the work tree itself:
//   - its commits (when the run commits: stet, commit_after_phase2) are the
//     work tree's: its HEAD moves to them (fast-forward when it holds no
//     uncommitted change); they are made in the worktree, by git with the
//     repository's identity and hooks, as in the work tree;
//   - what it did not commit comes back as files, uncommitted.
//
// Anything else that moves the work tree (a parallel block's merges, the
// user between runs) is mirrored in the worktree before the next task or
// check runs there, by git, which writes only what changed. The worktree
// is made when the first task or check needs it and outlives the run; what
// a run that died left there comes back at the next run's start
// (takeUp). The record of what the work tree took (worktree.Brought, in the
// state folder) keeps any work from coming back twice.

// homeTree is the run's worktree, and what the run knows of it.
type homeTree struct {
	at *site
	// brought is what the work tree holds of it.
	brought worktree.Brought
	// clean: the work tree held nothing uncommitted when it last took
	// the worktree's work, so its commits come back fast-forward.
	clean bool
	// fresh: made at the work tree's HEAD by this run, and not mirrored
	// yet; stale: the work tree moved since it was last mirrored.
	fresh, stale bool
	// busy: a task or a check ran there since its work last came back.
	busy bool
}

// atHome is the site where the run's tasks (those not in a worktree of a
// parallel block) and its checks work, ready for them: the work tree, or,
// where the kernel confines files, the run's worktree, made or mirrored
// now when it must be.
func (r *run) atHome(ctx context.Context) (*site, error) {
	if !r.confined.Files() {
		return r.main, nil
	}
	h := r.homeT
	if h == nil {
		var err error
		if h, err = r.openHome(ctx); err != nil {
			return nil, err
		}
		r.homeT, r.home = h, h.at
	}
	if h.stale {
		if err := r.mirror(ctx, h); err != nil {
			return nil, fmt.Errorf("bringing the work tree into the run's worktree: %w", err)
		}
	}
	h.busy = true
	return h.at, nil
}

// homeMoved notes that the work tree moved (a block's merge, or its
// undoing): the run's worktree is mirrored again before its next use.
func (r *run) homeMoved() {
	if r.homeT != nil {
		r.homeT.stale = true
	}
}

// openHome makes the run's worktree, or takes up the one an earlier run
// left, and links what git ignores in the work tree into it.
func (r *run) openHome(ctx context.Context) (*homeTree, error) {
	head, err := r.main.git.HeadOrNone(ctx)
	if err != nil {
		return nil, err
	}
	t := r.trees.Home()
	h := &homeTree{stale: true}
	if r.trees.HomeFound() {
		h.at = r.homeSite(t)
		if err := r.takeUp(ctx, h, head); err != nil {
			return nil, err
		}
	}
	if !r.trees.HomeFound() {
		if _, err := r.trees.AddHome(ctx, head); err != nil {
			return nil, fmt.Errorf("making the run's worktree for confined tasks: %w", err)
		}
		h.at = r.homeSite(t)
		h.fresh = true
		h.brought = worktree.Brought{Commit: head}
	}
	linked, err := r.trees.LinkIgnored(ctx, []string{r.cfg.StateDir, r.cfg.KnowledgeDir, r.cfg.AgentLogDir})
	if err != nil {
		return nil, fmt.Errorf("linking what git ignores in the work tree into the run's worktree: %w", err)
	}
	h.at.writable = r.linkedWritable(linked)
	r.guard.Add(t.Path, t.Dir)
	r.log.Info("the run's tasks work in a worktree of their own; their work comes back to the work tree as each ends", "worktree", t.Path,
		"branch", t.Branch, "linked_from_the_work_tree", len(linked))
	return h, nil
}

// homeSite is the site of the run's worktree t: the work tree's, moved.
func (r *run) homeSite(t *worktree.Tree) *site {
	caller := r.caller
	caller.Dir = t.Dir
	at := &site{caller: caller, tree: t.Path, main: r.main.tree, git: r.main.git.In(caller, t.Dir, false), commits: r.main.commits}
	at.reviewer = r.main.reviewer.Moved(caller, at.git, r.agents.At(r.callSite(at)), r.trees.Lock())
	return at
}

// mirror makes the run's worktree hold what the work tree holds: its
// HEAD, and its uncommitted changes (in the index, so that a commit there
// takes them as one in the work tree would).
func (r *run) mirror(ctx context.Context, h *homeTree) error {
	head, err := r.main.git.HeadOrNone(ctx)
	if err != nil {
		return err
	}
	changes, err := r.main.git.Changes(ctx)
	if err != nil {
		return err
	}
	tree := head
	switch {
	case len(changes) > 0:
		if tree, err = r.snapshot(ctx); err != nil {
			return err
		}
	case head == "":
		if tree, err = r.main.git.EmptyTree(ctx); err != nil {
			return err
		}
	}
	if !h.fresh || len(changes) > 0 || head != h.brought.Commit {
		if err := h.at.git.Mirror(ctx, head, tree); err != nil {
			return err
		}
	}
	h.brought = worktree.Brought{Commit: head, Tree: tree}
	if tree == head {
		h.brought.Tree = "" // the commit's own tree
	}
	h.clean, h.fresh, h.stale = len(changes) == 0, false, false
	return r.trees.NoteBrought(h.brought)
}

// snapshot is the tree of what the work tree holds, its uncommitted
// changes with it, through an index of peal's own.
func (r *run) snapshot(ctx context.Context) (string, error) {
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
	return r.main.git.Snapshot(ctx, index.Name())
}

// bringBack brings into the work tree what was done in the run's worktree
// since its work last came back: after each task that worked there, and at
// the end of the run. Work the work tree cannot take (something else
// changed the same files meanwhile) is kept on a branch, and the run's
// worktree made again; the error names the branch.
func (r *run) bringBack(ctx context.Context) error {
	h := r.homeT
	if h == nil || !h.busy {
		return nil
	}
	cctx, cancel := r.trees.CleanupContext(ctx)
	defer cancel()
	err := r.bring(cctx, h)
	if err == nil {
		h.busy = false
		return nil
	}
	return r.keepHome(cctx, err)
}

// keepHome keeps what the run's worktree holds on a branch, after why
// (the work tree could not take it), and forgets the worktree, which the
// next task makes again.
func (r *run) keepHome(ctx context.Context, why error) error {
	r.guard.Forget(r.homeT.at.tree)
	r.homeT, r.home = nil, r.main
	keeper := r.main.git.At(r.trees.Home().Path)
	keeper.Identity("peal", "peal@localhost")
	kept, err := r.trees.KeepHome(ctx, keeper)
	if err != nil {
		return fmt.Errorf("%w; keeping the run's work on a branch failed too: %v", why, err)
	}
	return fmt.Errorf("%w: the run's work that did not reach the work tree is kept on branch %s", why, kept)
}

// bring is bringBack's work: the worktree's commits become the work
// tree's (fast-forward when it holds nothing uncommitted), what it holds
// beyond them comes as files, and what its tasks did to the entries git
// ignores comes too.
func (r *run) bring(ctx context.Context, h *homeTree) error {
	st, err := h.at.git.Status(ctx)
	if err != nil {
		return err
	}
	if err := r.bringIgnored(ctx, h, st.Ignored); err != nil {
		return err
	}
	if !r.main.commits {
		// Nothing is committed there, and its index holds what the work
		// tree took: what its tasks did is what the index does not hold.
		if len(st.Unstaged) == 0 {
			return nil
		}
		if err := r.bringFiles(st.Unstaged); err != nil {
			return err
		}
		_, err := h.at.git.State(ctx)
		return err
	}
	dirty := st.Staged || len(st.Unstaged) > 0
	switch {
	case !dirty && st.Head == h.brought.Commit:
		return nil
	case !dirty && h.clean && h.brought.Commit != "":
		if err := r.trees.FastForward(ctx); err != nil {
			return err
		}
		h.brought = worktree.Brought{Commit: st.Head}
		return r.trees.NoteBrought(h.brought)
	}
	state, err := h.at.git.State(ctx)
	if err != nil {
		return err
	}
	from := h.brought.Tree
	if from == "" {
		if from = h.brought.Commit; from == "" {
			if from, err = h.at.git.EmptyTree(ctx); err != nil {
				return err
			}
		}
	}
	changes, err := h.at.git.TreeChanges(ctx, from, state)
	if err != nil {
		return err
	}
	if err := r.bringFiles(changes); err != nil {
		return err
	}
	if st.Head != h.brought.Commit {
		if err := r.main.git.MoveHead(ctx, h.brought.Commit, st.Head); err != nil {
			return fmt.Errorf("moving the work tree's HEAD to the run's commits: %w", err)
		}
	}
	h.brought = worktree.Brought{Commit: st.Head, Tree: state}
	// Nothing left uncommitted there: the work tree holds its HEAD alone,
	// and the next commits come back fast-forward.
	h.clean = !dirty
	if h.clean {
		h.brought.Tree = ""
	}
	return r.trees.NoteBrought(h.brought)
}

// bringFiles writes changes made in the run's worktree into the work tree.
func (r *run) bringFiles(changes []gitrepo.Change) error {
	skipped, err := r.trees.Bring(changes)
	if len(skipped) > 0 {
		r.log.Warn("changes of submodules made in the run's worktree are not brought into the work tree", "paths", gitrepo.ListPaths(skipped, 3))
	}
	if err == nil {
		r.log.Debug("the work tree took the changes of the run's worktree", "files", len(changes))
	}
	return err
}

// bringIgnored brings what the tasks did to the entries git ignores
// (ignored: those of the run's worktree), and lets its calls write the
// entries linked there.
func (r *run) bringIgnored(ctx context.Context, h *homeTree, ignored []string) error {
	linked, brought, err := r.trees.BringIgnored(ctx, ignored)
	if err != nil || !brought {
		return err
	}
	h.at.writable = r.linkedWritable(linked)
	return nil
}

// linkedWritable are the entries of the work tree that linked (relative,
// a folder's with a trailing /) name: the run's worktree's calls write
// them through their links.
func (r *run) linkedWritable(linked []string) []string {
	out := make([]string, len(linked))
	for i, p := range linked {
		out[i] = filepath.Join(r.main.tree, filepath.FromSlash(strings.TrimSuffix(p, "/")))
	}
	return out
}

// takeUp brings into the work tree what an earlier run that died left in
// the run's worktree, as that run would have left it in the work tree
// itself; head is the work tree's HEAD. Work it cannot take (the work tree
// moved since, or changed the same files) is kept on a branch. The
// worktree is then mirrored as usual.
func (r *run) takeUp(ctx context.Context, h *homeTree, head string) error {
	b, noted := r.trees.HomeBrought()
	h.brought, h.clean = b, b.Tree == ""
	nothing, err := r.leftNothing(ctx, h, b, noted)
	switch {
	case err != nil:
		return err
	case nothing:
		return nil
	case !noted || b.Commit != head:
		r.log.Warn("an earlier run left work in the run's worktree, and the work tree moved since (or what it took was not noted)", "worktree", h.at.tree)
		return r.keepLeft(ctx)
	}
	r.log.Warn("an earlier run died while its tasks worked in the run's worktree: its work comes to the work tree, as it would have been left there", "worktree", h.at.tree)
	if err := r.bring(ctx, h); err != nil {
		r.log.Warn("the work tree cannot take the work an earlier run left in the run's worktree", "err", err)
		return r.keepLeft(ctx)
	}
	return nil
}

// leftNothing reports whether the run's worktree holds nothing beyond what
// the work tree took (b, when noted; otherwise its HEAD, which the work
// tree holds): no commit, no change, no new entry git ignores. It reads
// the worktree's state through an index of its own, so that the
// worktree's index, which may be what the work tree took, stays.
func (r *run) leftNothing(ctx context.Context, h *homeTree, b worktree.Brought, noted bool) (bool, error) {
	st, err := h.at.git.Status(ctx)
	if err != nil {
		return false, err
	}
	links := r.trees.Linked()
	for _, p := range st.Ignored {
		if !slices.Contains(links, p) {
			return false, nil // made by a task: a build's output
		}
	}
	tmp := filepath.Join(r.cfg.StateDir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return false, err
	}
	index, err := os.CreateTemp(tmp, "home-index-")
	if err != nil {
		return false, err
	}
	index.Close()
	defer os.Remove(index.Name())
	state, err := h.at.git.Snapshot(ctx, index.Name())
	if err != nil {
		return false, err
	}
	if !noted {
		if st.Head != "" && !r.main.git.IsAncestor(ctx, st.Head, "HEAD") {
			return false, nil
		}
		b = worktree.Brought{Commit: st.Head}
	}
	from := b.Tree
	switch {
	case from != "":
	case b.Commit != "":
		from, err = h.at.git.TreeOf(ctx, b.Commit)
	default:
		from, err = h.at.git.EmptyTree(ctx)
	}
	return err == nil && st.Head == b.Commit && state == from, err
}

// keepLeft keeps what an earlier run left in the run's worktree on a
// branch, which it names in a warning, and removes the worktree.
func (r *run) keepLeft(ctx context.Context) error {
	keeper := r.main.git.At(r.trees.Home().Path)
	keeper.Identity("peal", "peal@localhost")
	kept, err := r.trees.KeepHome(ctx, keeper)
	if err != nil {
		return fmt.Errorf("keeping the work an earlier run left in the run's worktree: %w", err)
	}
	r.log.Warn("work an earlier run left in the run's worktree is kept on a branch; merge it by hand if you want it", "branch", kept)
	return nil
}

// leaveHome ends the run's use of its worktree, whatever ended the run:
// what was done there since it last came back comes to the work tree. The
// worktree stays for the next run. The error is the work tree's refusal of
// that work (kept on a branch).
func (r *run) leaveHome(ctx context.Context) error {
	if r.homeT == nil {
		return nil
	}
	err := r.bringBack(ctx)
	if r.homeT != nil {
		r.guard.Forget(r.homeT.at.tree)
	}
	r.homeT, r.home = nil, r.main
	return err
}
