// Package worktree owns the git worktrees that the tasks of a parallel
// block work in (parallel_isolation = worktree): a worktree per task on a
// branch of its own, made from the block's base commit, sparse or whole;
// the paths copied or linked into it and the section of info/exclude that
// keeps the links out of commits; its removal; the merge of a task's work
// into the work tree, undone when it conflicts; the branches kept for the
// user; the sweep of what a killed run left; and the disk a worktree takes.
// It owns too the run's worktree of a confined run (home.go, mirror.go): a
// worktree that mirrors the work tree, where the run's tasks work when the
// kernel confines files, and the files of their work brought back into the
// work tree (bring.go), data only. It keeps what is the user's (keep.go):
// the work tree marked before a task and settled after it, so that only a
// task that completed moves the user's branch, and only forward, and no
// file of the user's goes without a copy. It knows nothing of plans or
// agents: when worktrees are made, how many at once (within what the disk
// holds: Fits) and what a conflict or a failure does to a task are the
// runner's policy.
package worktree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"peal/internal/gitrepo"
	"peal/state"
)

// Folder is the folder of state_dir that holds the worktrees of the tasks
// of parallel blocks, each with its review folder beside it.
const Folder = "worktrees"

// KeptPrefix starts the branches peal keeps for the user: the work of a
// task whose merge conflicted, or that completed but was not merged before
// an interruption. Nothing of peal deletes them.
const KeptPrefix = "peal-kept/"

// Tree is the worktree of one task of a parallel block.
type Tree struct {
	Task   int
	Path   string // the worktree's top: {state_dir}/worktrees/task-N
	Dir    string // where the task's calls run: repo_path's place in the worktree
	Branch string // the branch checked out there, made from the block's base
	Review string // the task's review folder: {state_dir}/worktrees/task-N.review
}

// Set makes, merges and removes the worktrees of the tasks of the runs on
// one state folder. Its mutex serializes the git commands that change what
// the worktrees share with the work tree (adding and removing worktrees,
// branches, merges), peal's own and stet's (a review makes and removes a
// worktree of its own: see Lock), so that none reads the records of a
// worktree half made or half removed.
type Set struct {
	mu     sync.Mutex
	log    *slog.Logger
	state  string        // state_dir, absolute
	root   string        // {state_dir}/worktrees, absolute
	prefix string        // the branch namespace of this state folder: peal-<scope>/
	git    *gitrepo.Repo // the work tree's git
	rel    string        // repo_path relative to the top of its work tree
	sparse cone          // what each worktree checks out; empty: the whole tree
	// homeLinks are the entries linked into the home worktree, named in
	// info/exclude while it exists (relative to the top, slash form).
	homeLinks []string
	// homeFound: the home worktree is there, whole (see HomeFound).
	homeFound bool
	// own are peal's folders (Own); warnedLarge the ignored files a
	// warning named as too large to copy before a task (keep.go).
	own         []string
	warnedLarge map[string]bool
	// kept is what the run kept for the user (keep.go).
	keptMu sync.Mutex
	kept   []state.Kept
	left   int // the task of the mark an earlier run left; -1: none read
	// marked is the mark of the task running now (nil: none); refsMu
	// keeps the tasks of a block from putting refs back at once.
	marked *Mark
	refsMu sync.Mutex
	// notesDir is peal's folder in the repository's git folder.
	notesDir string
}

// New is the set of worktrees of the runs on stateDir, for the repository
// folder of git; their branches are named after scope, the state folder's
// call-id scope, as its runs' calls are. Each checks out the folders sparse
// (worktree_sparse_paths, relative to the repository folder), or the whole
// tree.
func New(git *gitrepo.Repo, log *slog.Logger, stateDir, scope string, sparse []string) *Set {
	state, err := filepath.Abs(stateDir)
	if err != nil {
		state = stateDir
	}
	rel, err := filepath.Rel(git.Top(), git.Dir())
	if err != nil || !filepath.IsLocal(rel) {
		rel = "."
	}
	return &Set{log: log, state: state, root: filepath.Join(state, Folder), prefix: "peal-" + scope + "/", git: git, rel: rel,
		sparse: coneOf(rel, sparse), left: -1}
}

// Describe writes, for the dry run, where the tasks of a block work: each
// in a worktree of its own under Root, checking out sparse (as
// worktree_sparse_paths sets it: none, the whole tree), given copies and
// links, and setup run in it.
func (s *Set) Describe(w io.Writer, indent string, sparse, copies, links []string, setup string) {
	fmt.Fprintf(w, "%seach task in a worktree of its own under %s, on a branch made from the work tree's HEAD when the block starts "+
		"(a tree with uncommitted changes, or without a commit, runs the block in the shared tree instead)\n", indent, s.root)
	if len(sparse) > 0 {
		fmt.Fprintf(w, "%seach worktree checks out only %s and the top-level files (worktree_sparse_paths, git's cone mode); what a task writes elsewhere is committed with its work\n",
			indent, strings.Join(sparse, ", "))
	}
	if len(copies) > 0 {
		fmt.Fprintf(w, "%scopied into each worktree: %s\n", indent, strings.Join(copies, ", "))
	}
	if len(links) > 0 {
		fmt.Fprintf(w, "%slinked into each worktree from the work tree, shared by the tasks and never committed: %s\n", indent, strings.Join(links, ", "))
	}
	if setup != "" {
		fmt.Fprintf(w, "%srun in each worktree before its first call: %s\n", indent, setup)
	}
}

// Root is the folder the worktrees are made in.
func (s *Set) Root() string { return s.root }

// Sparse reports whether the worktrees are sparse checkouts.
func (s *Set) Sparse() bool { return len(s.sparse) > 0 }

// Lock is the lock that git commands on the worktrees' shared records hold:
// stet's, which make and remove worktrees of their own, take it too.
func (s *Set) Lock() sync.Locker { return &s.mu }

// treePath is where the worktree of task is made in stateDir.
func treePath(stateDir string, task int) string {
	return filepath.Join(stateDir, Folder, fmt.Sprintf("task-%d", task))
}

// Of is the worktree task gets.
func (s *Set) Of(task int) *Tree {
	path := treePath(s.state, task)
	return &Tree{Task: task, Path: path, Dir: filepath.Join(path, s.rel), Branch: s.prefix + filepath.Base(path), Review: path + ".review"}
}

// CleanupContext is a context for the git commands that clean up or finish
// work on worktrees (removals, merges), which must run even once ctx is
// cancelled: bounded by git's timeout, or by a short grace once ctx is
// done (the work they clean up must not hold the run's exit up).
func (s *Set) CleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	timeout := s.git.Timeout()
	if ctx.Err() != nil {
		timeout = min(timeout, max(s.git.KillGrace(), 10*time.Second))
	}
	return context.WithTimeout(context.WithoutCancel(ctx), timeout)
}

// Base is the commit the worktrees of a block start from: the work tree's
// HEAD, when the tree is clean and has no submodule checked out; why says
// otherwise why the block cannot work in worktrees.
func (s *Set) Base(ctx context.Context) (base, why string) {
	head, err := s.git.Head(ctx)
	if err != nil {
		return "", "the repository has no commit yet"
	}
	changes, err := s.git.Changes(ctx)
	switch {
	case err != nil:
		return "", err.Error()
	case len(changes) > 0:
		return "", fmt.Sprintf("the work tree has uncommitted changes (%s), which a worktree would not hold", gitrepo.ListPaths(changes, 3))
	}
	// A task's own worktree would hold a submodule as an empty folder, where
	// its work would be lost: the block works where the submodules are.
	switch subs, err := s.git.Submodules(ctx); {
	case err != nil:
		return "", err.Error()
	case len(subs) > 0:
		paths := make([]string, len(subs))
		for i, sub := range subs {
			paths[i] = sub.Path
		}
		return "", fmt.Sprintf("the work tree has submodules checked out (%s), which a worktree of a task's own would hold empty", gitrepo.ListPaths(paths, 3))
	}
	return head, ""
}

// Add makes the worktree of task on a new branch at base. git worktree add
// reads the records of every other worktree, and fails on one that is being
// made or removed ("failed to read .git/worktrees/…"), so the worktree is
// registered one at a time, without its files (a few milliseconds); the
// files, the bulk of the cost on a large tree, are then written outside the
// lock, so that the tasks of a block write theirs at the same time. An add
// that fails removes what it made.
func (s *Set) Add(ctx context.Context, task int, base string) (*Tree, error) {
	return s.add(ctx, s.Of(task), base, len(s.sparse) > 0)
}

// add makes the worktree t at base, sparse or whole (see Add).
func (s *Set) add(ctx context.Context, t *Tree, base string, sparse bool) (*Tree, error) {
	err := s.register(ctx, t, base, sparse)
	if err == nil {
		// read-tree touches only this worktree's index and files. No
		// parallel checkout (checkout.workers): the tasks of a block
		// already write at the same time, and workers of each on top made
		// a block of 4 on 10 000 files several times slower on 2 cores.
		if err = s.git.Populate(ctx, t.Path); err != nil {
			err = fmt.Errorf("checking out the files of %s: %w", t.Path, err)
		}
	}
	if err != nil {
		s.discard(ctx, t)
		return nil, err
	}
	return t, nil
}

// discard removes what an add that failed made of t: an add cut short (a
// signal) may have made the branch, or part of the worktree.
func (s *Set) discard(ctx context.Context, t *Tree) {
	cctx, cancel := s.CleanupContext(ctx)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.forget(cctx, t); err != nil {
		s.log.Warn("could not remove what a failed worktree add made; the next run removes it", "task", t.Task, "worktree", t.Path, "err", err)
	}
	// The add may have failed before making the branch: a branch that is
	// not there is what the deletion wants.
	if err := s.git.DeleteBranch(cctx, t.Branch); err != nil && s.branchExists(cctx, t.Branch) {
		s.log.Warn("could not delete the branch of a failed worktree add; the next run deletes it", "task", t.Task, "branch", t.Branch, "err", err)
	}
}

// branchExists reports whether branch is there (or whether git could not
// tell: then it may be).
func (s *Set) branchExists(ctx context.Context, branch string) bool {
	_, err := s.git.Resolve(ctx, "refs/heads/"+branch, 0)
	return err == nil || !gitrepo.Exited(err, 1)
}

// register adds the worktree t, with no files checked out yet, and makes
// it a sparse checkout when sparse is set (under the lock: the first one
// turns git's per-worktree configuration on in the repository's
// configuration file).
func (s *Set) register(ctx context.Context, t *Tree, base string, sparse bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.MkdirAll(s.root, 0o755); err != nil {
		return fmt.Errorf("worktrees folder %s: %w", s.root, err)
	}
	if _, err := os.Lstat(t.Path); err == nil {
		// Left by an earlier block of this run that could not remove it.
		if err := s.forget(ctx, t); err != nil {
			return fmt.Errorf("a worktree an earlier block left at %s could not be removed: %w", t.Path, err)
		}
	}
	if err := s.git.AddWorktree(ctx, t.Path, t.Branch, base); err != nil {
		return err
	}
	if sparse {
		if err := s.git.SetSparse(ctx, t.Path, s.sparse); err != nil {
			return fmt.Errorf("making %s a sparse checkout: %w", t.Path, err)
		}
	}
	return nil
}

// forget removes the worktree of t and its review folder (its branch
// stays): git's record of it, then whatever is left on disk; the error is
// of what could not be removed from disk. Callers hold mu.
func (s *Set) forget(ctx context.Context, t *Tree) error {
	// git's own removal may fail half way (a file it cannot delete) or
	// find nothing to remove; what is on disk is removed below either way,
	// and the prune forgets the record once the folder is gone.
	if err := s.git.RemoveWorktree(ctx, t.Path); err != nil {
		s.log.Debug("git worktree remove failed; removing the folder itself", "worktree", t.Path, "err", err)
	}
	err := removeTree(t.Path)
	if rerr := removeTree(t.Review); err == nil {
		err = rerr
	}
	// stet's own worktrees lived in the review folder: git forgets them
	// too, with the task's if its removal failed.
	s.prune(ctx)
	return err
}

// prune has git forget the worktrees whose folders are gone. A prune that
// fails leaves records that name no folder, which every later prune (the
// next removal's, the next run's sweep) drops: it is only noted.
func (s *Set) prune(ctx context.Context) {
	if err := s.git.PruneWorktrees(ctx); err != nil {
		s.log.Warn("git could not forget the removed worktrees; a later prune does", "err", err)
	}
}

// removeTree removes a folder of the worktrees folder and all it holds;
// links are removed, never followed.
func removeTree(path string) error { return os.RemoveAll(path) }

// Remove removes the worktree of t and its review folder; its branch
// stays. Under the lock the two folders are only moved aside, into a folder
// of the worktrees folder, and git forgets the worktree (prune: its folder
// is gone); their files are deleted after, without the lock, so that a
// merge into the work tree, or another task's worktree, never waits for
// thousands of files to go. What a kill leaves aside, the next run's sweep
// removes with the rest of the worktrees folder.
func (s *Set) Remove(ctx context.Context, t *Tree) error {
	s.mu.Lock()
	aside, err := s.moveAside(t)
	if err != nil {
		// Not movable (the folder is gone already, say): removed in place.
		err = s.forget(ctx, t)
		s.mu.Unlock()
		return err
	}
	s.prune(ctx)
	s.mu.Unlock()
	return removeTree(aside)
}

// Retire removes the worktree t, made from base, of a task that ended,
// and says in a line what it could not do (the next run does it). The
// branch of a task that completed stays for its merge, and what the task
// wrote outside the sparse set is said; a task that did not complete has
// its branch deleted (its work kept first: KeepTask).
func (s *Set) Retire(ctx context.Context, t *Tree, base string, completed bool) {
	cctx, cancel := s.CleanupContext(ctx)
	defer cancel()
	if err := s.Remove(cctx, t); err != nil {
		s.log.Warn("could not remove a task's worktree; the next run removes it", "task", t.Task, "worktree", t.Path, "err", err)
	}
	if !completed {
		if err := s.DeleteBranch(cctx, t.Branch); err != nil {
			s.log.Warn("could not delete a task's branch; the next run deletes it", "task", t.Task, "branch", t.Branch, "err", err)
		}
		return
	}
	outside, err := s.Outside(cctx, base, t.Branch)
	if err != nil {
		s.log.Warn("could not tell whether the task wrote outside worktree_sparse_paths", "task", t.Task, "err", err)
	}
	if len(outside) > 0 {
		s.log.Warn("the task wrote outside worktree_sparse_paths: those files are committed and merged with the rest of its work", "task", t.Task, "files", gitrepo.ListPaths(outside, 5))
	}
}

// moveAside moves the worktree of t and its review folder into a new
// folder of the worktrees folder and returns it. Callers hold mu.
func (s *Set) moveAside(t *Tree) (string, error) {
	aside, err := os.MkdirTemp(s.root, ".removed-")
	if err != nil {
		return "", err
	}
	if err := os.Rename(t.Path, filepath.Join(aside, "tree")); err != nil {
		os.Remove(aside) // empty: made just now
		return "", err
	}
	if err := os.Rename(t.Review, filepath.Join(aside, "review")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		// The worktree is aside already: the review folder goes in place.
		if rerr := removeTree(t.Review); rerr != nil {
			s.log.Warn("could not remove a task's review folder; the next run removes it", "task", t.Task, "folder", t.Review, "err", rerr)
		}
	}
	return aside, nil
}

// DeleteBranch deletes a task's branch.
func (s *Set) DeleteBranch(ctx context.Context, branch string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.git.DeleteBranch(ctx, branch)
}

// Keep renames a task's branch out of the run's namespace, under a name the
// next run leaves alone, and returns that name.
func (s *Set) Keep(ctx context.Context, task int, branch string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tip, err := s.git.Resolve(ctx, branch, 8)
	if err != nil {
		return branch, err
	}
	kept := keptName(task, tip)
	if err := s.git.RenameBranch(ctx, branch, kept); err != nil {
		return branch, err
	}
	return kept, nil
}

// keptName is the name of the kept branch of task whose tip is tip (task
// -1: the home worktree's).
func keptName(task int, tip string) string {
	if task < 0 {
		return KeptPrefix + homeName + "-" + tip
	}
	return fmt.Sprintf("%stask-%d-%s", KeptPrefix, task, tip)
}
