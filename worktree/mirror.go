package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"peal/internal/gitrepo"
	"peal/state"
)

// Mirror is the home worktree as a run uses it: a mirror of the work tree
// (its HEAD, what it holds uncommitted, what git ignores there linked),
// whose tasks' work comes back to the work tree as each ends, as it would
// have been left there (Bring). What the work tree took of it is noted in
// the worktrees folder (Brought), so that no work comes back twice, and a
// run that died leaves nothing behind that the next one does not bring.
type Mirror struct {
	set  *Set
	Tree *Tree
	git  *gitrepo.Repo // the home worktree's
	main *gitrepo.Repo // the work tree's
	// commits: the run commits its tasks' work (stet, commit_after_phase2);
	// otherwise nothing is committed in the home worktree, and its index
	// holds what the work tree took.
	commits bool
	tmp     string // where temporary indexes go
	// Linked are the entries of the work tree linked into it (relative, a
	// folder's with a trailing /).
	Linked []string

	brought Brought
	// clean: the work tree held nothing uncommitted when it last took the
	// home worktree's work, so its commits come back fast-forward.
	clean bool
	// fresh: made at the work tree's HEAD by this run, not mirrored yet;
	// stale: the work tree moved since it was last mirrored; busy:
	// something ran there since its work last came back.
	fresh, stale, busy bool
	// watch tells whether anything changed there since its work last came
	// back (nil: it cannot tell, so the worktree is always looked at).
	watch *changeWatch
	// dropped: the home worktree was removed, its work kept on a branch.
	dropped bool
	// modules are the work tree's submodules, checked out there too
	// (modules.go).
	modules []*module
}

// OpenMirror makes the home worktree, or takes up the one an earlier run
// left (bringing into the work tree what that run left there, as it would
// have been left in the work tree, or keeping it on a branch when the work
// tree cannot take it), and links what git ignores in the work tree into
// it but own. gitOf is the git of a worktree, as the run runs it; commits
// and tmp are as in Mirror.
func (s *Set) OpenMirror(ctx context.Context, gitOf func(*Tree) *gitrepo.Repo, commits bool, tmp string, own []string) (*Mirror, error) {
	head, err := s.git.HeadOrNone(ctx)
	if err != nil {
		return nil, err
	}
	m := &Mirror{set: s, Tree: s.Home(), main: s.git, commits: commits, tmp: tmp, stale: true}
	if s.HomeFound() {
		m.git = gitOf(m.Tree)
		if err := m.takeUp(ctx, head); err != nil {
			return nil, err
		}
	}
	if !s.HomeFound() {
		if _, err := s.AddHome(ctx, head); err != nil {
			return nil, fmt.Errorf("making the run's worktree for confined tasks: %w", err)
		}
		m.git = gitOf(m.Tree)
		m.fresh, m.brought = true, Brought{Commit: head}
	}
	if err := m.openModules(ctx); err != nil {
		return nil, fmt.Errorf("making the run's worktree for confined tasks: %w", err)
	}
	if m.Linked, err = s.linkIgnored(ctx, own, m.modules); err != nil {
		return nil, fmt.Errorf("linking what git ignores in the work tree into the run's worktree: %w", err)
	}
	m.leaveModules()
	// A task that changed nothing costs no git command to bring back.
	m.watch = watchTree(m.Tree.Path)
	return m, nil
}

// Use readies the home worktree for a task or a check: mirrored again when
// the work tree moved since; what runs there from now on comes back at the
// next Bring.
func (m *Mirror) Use(ctx context.Context) error {
	if m.stale {
		if err := m.mirror(ctx); err != nil {
			return fmt.Errorf("bringing the work tree into the run's worktree: %w", err)
		}
		m.watch.Changed() // what the mirror wrote is no task's work
	}
	m.busy = true
	return nil
}

// LinkedIn are the entries of the work tree tree that Linked names, as
// paths of it: the home worktree's calls write them through their links.
func (m *Mirror) LinkedIn(tree string) []string {
	out := make([]string, len(m.Linked))
	for i, p := range m.Linked {
		out[i] = filepath.Join(tree, filepath.FromSlash(strings.TrimSuffix(p, "/")))
	}
	return out
}

// Close ends the watch of the home worktree, once the run no longer uses
// it.
func (m *Mirror) Close() { m.watch.Close() }

// Moved notes that the work tree moved (a block's merge, or its undoing):
// the home worktree is mirrored again before its next use.
func (m *Mirror) Moved() { m.stale = true }

// mirror makes the home worktree hold what the work tree holds: its HEAD,
// and its uncommitted changes (in the index, so that a commit there takes
// them as one in the work tree would).
func (m *Mirror) mirror(ctx context.Context) error {
	head, err := m.main.HeadOrNone(ctx)
	if err != nil {
		return err
	}
	changes, err := m.main.Changes(ctx)
	if err != nil {
		return err
	}
	tree := head
	switch {
	case len(changes) > 0:
		if tree, err = m.snapshot(ctx, m.main); err != nil {
			return err
		}
	case head == "":
		if tree, err = m.main.EmptyTree(ctx); err != nil {
			return err
		}
	case len(m.modules) > 0:
		// git status says nothing of a submodule checked out at another
		// commit than the one recorded (peal's git never looks into one):
		// the snapshot does, as a commit in the work tree would take it.
		if changes, tree, err = m.movedModules(ctx, head); err != nil {
			return err
		}
	}
	if !m.fresh || len(changes) > 0 || head != m.brought.Commit {
		if err := m.git.Mirror(ctx, head, tree); err != nil {
			return err
		}
	}
	// The submodules: those the work tree has now, as it has them.
	if err := m.openModules(ctx); err != nil {
		return err
	}
	if err := m.mirrorModules(ctx); err != nil {
		return err
	}
	m.brought = Brought{Commit: head, Tree: tree}
	if tree == head {
		m.brought.Tree = "" // the commit's own tree
	}
	m.clean, m.fresh, m.stale = len(changes) == 0, false, false
	return m.set.NoteBrought(m.brought)
}

// snapshot is the tree of what the work tree of git holds, its uncommitted
// changes with it, through an index of its own.
func (m *Mirror) snapshot(ctx context.Context, git *gitrepo.Repo) (string, error) {
	if err := os.MkdirAll(m.tmp, 0o700); err != nil {
		return "", err
	}
	index, err := os.CreateTemp(m.tmp, "snapshot-index-")
	if err != nil {
		return "", err
	}
	index.Close()
	defer os.Remove(index.Name())
	return git.Snapshot(ctx, index.Name())
}

// Bring brings into the work tree what was done in the home worktree since
// its work last came back, when something ran there. Work the work tree
// cannot take (something else changed the same files meanwhile) is an
// error: the caller keeps it (Keep).
func (m *Mirror) Bring(ctx context.Context) error {
	if !m.busy {
		return nil
	}
	if !m.watch.Changed() {
		m.busy = false
		return nil
	}
	if err := m.bring(ctx); err != nil {
		return err
	}
	m.busy = false
	m.watch.Changed() // the links it made are no task's work
	return nil
}

// Keep keeps what the home worktree holds (the work of task, or of no
// task: -1), which the work tree could not take (refused, Bring's error),
// on a branch of its own, and removes the worktree (the next OpenMirror
// makes it again). The error is refused, saying where the work is kept
// (the branch, and the submodules' branches) and, when a path the person
// changed meanwhile was in the way, what to do next.
func (m *Mirror) Keep(ctx context.Context, task int, refused error) error {
	k, where, err := m.keepHome(ctx, task, "the work tree could not take it: "+refused.Error(), time.Now())
	switch {
	case err != nil:
		return fmt.Errorf("%w; keeping the run's work on a branch failed too: %v", refused, err)
	case k != nil && where != "":
		where = k.Ref + ", and on " + where
	case k != nil:
		where = k.Ref
	}
	if be := (*BringError)(nil); errors.As(refused, &be) && be.Edited {
		return fmt.Errorf("%w; the run's work is kept on branch %s: commit or stash your change of %s, then take the run's work with git merge %s (or run peal again)",
			refused, where, be.Path, where)
	}
	return fmt.Errorf("%w; the run's work is kept on branch %s", refused, where)
}

// KeepTask keeps what task did in the home worktree, which did not
// complete (why says how it ended), on a branch of its own (its commits,
// and what it left uncommitted as one commit on top), instead of bringing
// it to the work tree, and removes the home worktree (the next Use makes
// it again): a task's work reaches the user's branch only once it
// completed. Nothing is kept when the task made nothing; where it is kept,
// or why it could not be, is said in a line.
func (m *Mirror) KeepTask(ctx context.Context, task int, why string, now time.Time) (*state.Kept, error) {
	if !m.busy {
		return nil, nil
	}
	m.busy = false
	if !m.watch.Changed() {
		return nil, nil // nothing ran there since its work last came back
	}
	k, _, err := m.keepHome(ctx, task, why, now) // the submodules' branches are in k.Why
	m.set.noteKept(task, k, err)
	return k, err
}

// keepHome keeps what the home worktree holds beyond what the work tree
// took on a branch (see Set.keepWork), and what the tasks did in its
// submodules' checkouts on a branch of each one's repository (mods names
// them, "" for none), notes it, and removes the home worktree.
func (m *Mirror) keepHome(ctx context.Context, task int, why string, now time.Time) (kept *state.Kept, mods string, err error) {
	// What the tasks did in the submodules' checkouts goes on a branch of
	// each one's repository first.
	if mods, err = m.keepModules(ctx); err != nil {
		return nil, "", err
	}
	// A repository a call made there is kept as its files (its .git goes,
	// with the worktree): peal commits no repository, and runs no git in
	// one.
	made, err := m.git.Made(ctx)
	if err == nil {
		err = m.git.Unembed(made)
	}
	if err != nil {
		return nil, mods, err
	}
	head, err := m.git.HeadOrNone(ctx)
	if err != nil {
		return nil, mods, err
	}
	from, err := m.from(ctx, m.brought)
	if !m.commits && err == nil {
		// Nothing is committed there: its index holds what the work tree
		// took.
		from, err = m.git.IndexTree(ctx)
	}
	if err != nil {
		return nil, mods, err
	}
	branch, err := m.main.HeadRef(ctx)
	if err != nil {
		return nil, mods, err
	}
	kept, err = m.set.keepWork(ctx, m.git, &Mark{Head: m.brought.Commit, Branch: branch, Tree: from}, task, head, now)
	if err != nil {
		return nil, mods, fmt.Errorf("keeping the work of the run's worktree on a branch: %w", err)
	}
	if kept != nil {
		kept.Why = why
		if mods != "" {
			kept.Why += "; its work in submodules is kept on " + mods
		}
		m.set.record(ctx, kept)
	}
	m.Close()
	m.dropped = true
	err = m.set.DropHome(ctx)
	m.forgetModules(ctx)
	return kept, mods, err
}

// Dropped reports whether the home worktree was removed (Keep, KeepTask):
// the run makes a new Mirror for its next use.
func (m *Mirror) Dropped() bool { return m.dropped }

// bring is Bring's work: the home worktree's commits become the work
// tree's (fast-forward when it holds nothing uncommitted), what it holds
// beyond them comes as files, and what its tasks did to the entries git
// ignores comes too.
func (m *Mirror) bring(ctx context.Context) error {
	st, err := m.git.Status(ctx)
	if err != nil {
		return err
	}
	if len(st.Embedded) > 0 {
		return &gitrepo.EmbeddedError{Tree: m.Tree.Path, Paths: st.Embedded}
	}
	mods, err := m.moduleWork(ctx)
	if err != nil {
		return err
	}
	if err := m.bringIgnored(ctx, append(st.Ignored, mods.ignored...)); err != nil {
		return err
	}
	// The submodules' files come as files, and stay uncommitted there.
	if err := m.bringFiles(mods.changes); err != nil {
		return err
	}
	if err := noteModules(ctx, mods.changed); err != nil {
		return err
	}
	if !m.commits {
		// Nothing is committed there, and its index holds what the work
		// tree took: what its tasks did is what the index does not hold.
		if len(st.Unstaged) == 0 {
			return nil
		}
		if err := m.bringFiles(st.Unstaged); err != nil {
			return err
		}
		_, err := m.git.State(ctx)
		return err
	}
	dirty := st.Staged || len(st.Unstaged) > 0
	switch {
	case !dirty && st.Head == m.brought.Commit:
		return nil
	case !dirty && m.clean && m.brought.Commit != "":
		if err := m.set.FastForward(ctx); err != nil {
			return err
		}
		m.brought = Brought{Commit: st.Head}
		return m.set.NoteBrought(m.brought)
	}
	if st.Head != m.brought.Commit && m.brought.Commit != "" && !m.git.IsAncestor(ctx, m.brought.Commit, st.Head) {
		// History is only added to: the work tree's branch never moves
		// back, nor to commits that rewrote its own.
		return &BringError{Path: m.Tree.Branch, Why: "the run's worktree's branch no longer holds the commit the work tree is at (a reset, an amended or rebased commit)"}
	}
	state, err := m.git.State(ctx)
	if err != nil {
		return err
	}
	from, err := m.from(ctx, m.brought)
	if err != nil {
		return err
	}
	changes, err := m.git.TreeChanges(ctx, from, state)
	if err != nil {
		return err
	}
	if err := m.bringFiles(changes); err != nil {
		return err
	}
	if st.Head != m.brought.Commit {
		if err := m.main.MoveHead(ctx, m.brought.Commit, st.Head); err != nil {
			return fmt.Errorf("moving the work tree's HEAD to the run's commits: %w", err)
		}
	}
	// Nothing left uncommitted there: the work tree holds its HEAD alone,
	// and the next commits come back fast-forward.
	m.brought, m.clean = Brought{Commit: st.Head, Tree: state}, !dirty
	if m.clean {
		m.brought.Tree = ""
	}
	return m.set.NoteBrought(m.brought)
}

// from is the tree the work tree held when it took b: b's tree, its
// commit's, or the empty tree.
func (m *Mirror) from(ctx context.Context, b Brought) (string, error) {
	switch {
	case b.Tree != "":
		return b.Tree, nil
	case b.Commit != "":
		return m.git.TreeOf(ctx, b.Commit)
	}
	return m.git.EmptyTree(ctx)
}

// bringFiles writes changes made in the home worktree into the work tree.
func (m *Mirror) bringFiles(changes []gitrepo.Change) error {
	skipped, err := m.set.Bring(changes)
	if err == nil && len(skipped) > 0 {
		// What a submodule's checkout there holds comes as its files; a
		// gitlink that moved is no file to bring, and is never dropped.
		return &BringError{Path: gitrepo.ListPaths(skipped, 3), Why: "the submodule's commit changed in the run's worktree, which peal does not bring into the work tree"}
	}
	return err
}

// bringIgnored brings what the tasks did to the entries git ignores
// (ignored: those of the home worktree).
func (m *Mirror) bringIgnored(ctx context.Context, ignored []string) error {
	linked, brought, err := m.set.BringIgnored(ctx, ignored)
	if err == nil && brought {
		m.Linked = linked
		m.leaveModules()
	}
	return err
}

// takeUp brings into the work tree what an earlier run that died left in
// the home worktree, as that run would have left it in the work tree
// itself; head is the work tree's HEAD. Work it cannot take (the work tree
// moved since, or changed the same files) is kept on a branch.
func (m *Mirror) takeUp(ctx context.Context, head string) error {
	b, noted := m.set.HomeBrought()
	m.brought, m.clean = b, b.Tree == ""
	if err := m.openModules(ctx); err != nil {
		return err
	}
	nothing, err := m.leftNothing(ctx, b, noted)
	switch {
	case err != nil:
		return err
	case nothing:
		return nil
	case !noted || b.Commit != head:
		m.set.log.Warn("an earlier run left work in the run's worktree, and the work tree moved since (or what it took was not noted)", "worktree", m.Tree.Path)
	default:
		// Work of a task that never completed: it never reaches the
		// user's branch.
		m.set.log.Warn("an earlier run died while a task worked in the run's worktree, before the task completed", "worktree", m.Tree.Path)
	}
	return m.keepLeft(ctx)
}

// leftNothing reports whether the home worktree holds nothing beyond what
// the work tree took (b, when noted; otherwise its HEAD, which the work
// tree holds): no commit, no change, no new entry git ignores. It reads
// its state through an index of its own, so that its index, which may be
// what the work tree took, stays.
func (m *Mirror) leftNothing(ctx context.Context, b Brought, noted bool) (bool, error) {
	st, err := m.git.Status(ctx)
	if err != nil {
		return false, err
	}
	mods, err := m.moduleWork(ctx)
	if err != nil || len(mods.changes) > 0 || len(st.Embedded) > 0 {
		return false, err
	}
	links := m.set.Linked()
	for _, p := range append(st.Ignored, mods.ignored...) {
		if !slices.Contains(links, p) {
			return false, nil // made by a task: a build's output
		}
	}
	state, err := m.snapshot(ctx, m.git)
	if err != nil {
		return false, err
	}
	if !noted {
		if st.Head != "" && !m.main.IsAncestor(ctx, st.Head, "HEAD") {
			return false, nil
		}
		b = Brought{Commit: st.Head}
	}
	from, err := m.from(ctx, b)
	return err == nil && st.Head == b.Commit && state == from, err
}

// keepLeft keeps what an earlier run left in the home worktree on a
// branch, which it names in a warning, and removes the worktree.
func (m *Mirror) keepLeft(ctx context.Context) error {
	m.set.LeftMark(ctx)
	task := m.set.leftTask()
	kept, _, err := m.keepHome(ctx, task, "an earlier run ended before its work in the run's worktree was brought to the work tree", time.Now())
	if err != nil {
		return fmt.Errorf("keeping the work an earlier run left in the run's worktree: %w", err)
	}
	if kept != nil {
		m.set.log.Warn(kept.Line())
	}
	return nil
}
