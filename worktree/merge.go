package worktree

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"peal/internal/gitrepo"
	"peal/internal/safefs"
	"peal/internal/text"
)

// noteName is the file of the worktrees folder that names the branch being
// merged into the work tree, and the commit the tree was at before, while
// the merge runs and, with check_commands, until the merged tree's checks
// have passed and the task is saved as completed: the next run undoes a
// merge a kill left half done, or left unchecked.
const noteName = "merging"

// maxNote bounds what is read of the merge note: a few hundred bytes when
// peal wrote it.
const maxNote = 64 << 10

// mergeNote is the content of the merge note.
type mergeNote struct {
	Task   int    `json:"task"`
	Branch string `json:"branch"`
	Before string `json:"before"`
}

// ConflictError: git could not merge the work of a task of a parallel
// block into the work tree. The merge was undone and the task's work kept
// on Branch. (What a conflict does to the task is the runner's.)
type ConflictError struct {
	Task   int
	Branch string
	Files  []string // the files both sides changed; none when git refused the merge before starting it
	Detail string   // what git said, when no file conflicted
}

func (e *ConflictError) Error() string {
	what := "conflicts in " + gitrepo.ListPaths(e.Files, 5)
	if len(e.Files) == 0 {
		what = "failed: " + e.Detail
	}
	return fmt.Sprintf("merging task %d into the work tree %s; the merge was undone and the task's work is kept on branch %s (parallel_conflict)", e.Task, what, e.Branch)
}

// Merge merges branch, the work of task, into the work tree with a merge
// commit, and returns the commit the tree was at before ("" when the task
// changed nothing and there was nothing to merge). A merge that fails is
// undone at once; the error is then a *ConflictError naming the
// conflicting files (its Branch still the task's branch). A merge that
// succeeded leaves its note until MergeDone.
func (s *Set) Merge(ctx context.Context, task int, branch string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	into := s.git
	if into.IsAncestor(ctx, branch, "HEAD") {
		return "", nil // the task changed nothing
	}
	before, err := into.Head(ctx)
	if err != nil {
		return "", fmt.Errorf("the work tree's HEAD before merging task %d: %w", task, err)
	}
	if err := s.InTheWay(ctx, branch); err != nil {
		// git would refuse it too (--no-overwrite-ignore), or it would write
		// peal's own folders or a git folder; this says which path, before
		// any merge starts.
		return "", &ConflictError{Task: task, Branch: branch, Detail: err.Error()}
	}
	if err := s.writeNote(mergeNote{Task: task, Branch: branch, Before: before}); err != nil {
		return "", err
	}
	merr := into.Merge(ctx, branch, fmt.Sprintf("peal: merge task %d (%s)", task, branch), false)
	if merr == nil {
		return before, nil
	}
	defer s.dropNote()
	if ctx.Err() != nil {
		if err := s.undoMerge(context.WithoutCancel(ctx)); err != nil {
			s.log.Warn("could not undo a merge cut short by a signal; the next run undoes it", "task", task, "err", err)
		}
		return "", merr
	}
	conflict := &ConflictError{Task: task, Branch: branch}
	files, uerr := into.Unmerged(ctx)
	if uerr != nil {
		s.log.Debug("could not list the files of a failed merge", "task", task, "err", uerr)
	}
	conflict.Files = files
	if len(conflict.Files) == 0 {
		var gerr *gitrepo.Error
		if errors.As(merr, &gerr) {
			conflict.Detail = text.Snippet(strings.TrimSpace(gerr.Stderr+"\n"+gerr.Stdout), 200)
		} else {
			conflict.Detail = text.Snippet(merr.Error(), 200)
		}
	}
	if err := s.undoMerge(ctx); err != nil {
		return "", fmt.Errorf("%v; undoing the merge failed too: %w", conflict, err)
	}
	return "", conflict
}

// MergeDone drops the note of a merge whose task is saved as completed.
func (s *Set) MergeDone() { s.dropNote() }

// Unmerge undoes a merge that succeeded, whose merged tree failed the
// checks (or whose checks were cut short): the work tree goes back to
// before, keeping what is not the merge's (git reset --keep). Its note
// goes once it is undone; one that cannot be undone stays for the next run
// to try again.
func (s *Set) Unmerge(ctx context.Context, task int, before string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.git.ResetKeep(ctx, before); err != nil {
		return fmt.Errorf("undoing the merge of task %d (git reset --keep %s in the work tree): %w", task, before, err)
	}
	s.dropNote()
	return nil
}

// undoMerge undoes a merge in progress, when there is one.
func (s *Set) undoMerge(ctx context.Context) error {
	into := s.git
	if !into.MergeInProgress(ctx) {
		return nil // git refused the merge before starting it: nothing to undo
	}
	return into.AbortMerge(ctx)
}

// writeNote writes the merge note, atomically: a kill leaves the note
// whole or absent. Callers hold mu.
func (s *Set) writeNote(n mergeNote) error {
	data, err := json.Marshal(n)
	if err != nil {
		return err
	}
	d, err := safefs.OpenDir(s.root, true)
	if err != nil {
		return fmt.Errorf("worktrees folder %s: %w", s.root, safefs.Reason(err))
	}
	defer d.Close()
	if info, err := d.Lstat(noteName); err == nil && !info.Mode().IsRegular() {
		// Something else took its name (an agent can write in the state
		// folder): it is left for the user to look at.
		what := "not a regular file"
		if info.IsDir() {
			what = "a folder"
		}
		return fmt.Errorf("the merge note %s is %s: remove it", d.Join(noteName), what)
	}
	if err := d.WriteFile(noteName, append(data, '\n')); err != nil {
		return fmt.Errorf("the merge note in %s: %w", s.root, safefs.Reason(err))
	}
	return nil
}

// dropNote removes the merge note; one that is already gone is what is
// wanted. Callers hold mu.
func (s *Set) dropNote() {
	if err := os.Remove(filepath.Join(s.root, noteName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("could not remove the merge note; the next run reads it and finds the merge settled", "err", err)
	}
}

// readNote reads the merge note an earlier run left, as readable and
// capped as every file peal reads back: ok is false when there is none. A
// note that cannot be read is kept aside, with a warning, and counts as
// none. A note of an older peal holds the branch's name alone. Callers
// hold mu.
func (s *Set) readNote(now time.Time) (n mergeNote, ok bool) {
	d, err := safefs.OpenDir(s.root, false)
	if err != nil {
		return n, false
	}
	defer d.Close()
	if _, err := d.RemoveTemps(noteName); err != nil {
		s.log.Debug("could not remove the temporary files of an interrupted write of the merge note", "err", err)
	}
	data, err := d.ReadFile(noteName, maxNote)
	if errors.Is(err, fs.ErrNotExist) {
		return n, false
	}
	if err == nil {
		if text := strings.TrimSpace(string(data)); strings.HasPrefix(text, "{") {
			if json.Unmarshal(data, &n) == nil && n.Branch != "" {
				return n, true
			}
		} else if branchName(text) {
			return mergeNote{Branch: text}, true
		}
	}
	if aside, kerr := d.KeepUnreadable(noteName, now); kerr == nil {
		s.log.Warn("the note of a merge an earlier run began is unreadable: kept aside, the merge it names is not checked", "file", aside)
	} else {
		s.log.Warn("the note of a merge an earlier run began is unreadable and could not be moved aside", "file", d.Join(noteName), "err", safefs.Reason(kerr))
	}
	return mergeNote{}, false
}

// branchName reports whether s can be the branch name an older note held:
// one line, without the spaces and control characters git refuses in a
// branch's name.
func branchName(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '~' || r == '^' || r == ':' })
}

// Sweep removes what an earlier run on this state folder left when it died
// (SIGKILL) in a parallel block: its worktrees (and stet's inside their
// review folders; sparse or not, their links removed, never followed),
// git's records of them, its branches, its section of info/exclude, and a
// merge it left half done or left unchecked (completed tells which tasks
// are saved as completed). The run holds the state folder, so none of it
// is in use. Like every clean-up, it runs to its end (under a bound) even
// when a signal has come meanwhile.
func (s *Set) Sweep(ctx context.Context, completed func(task int) bool) {
	ctx, cancel := s.CleanupContext(ctx)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	var removed []string
	paths, err := s.git.Worktrees(ctx)
	if err != nil {
		s.log.Warn("could not list the worktrees an earlier run may have left; their folders are removed and git's records pruned", "err", err)
	}
	if _, serr := os.Lstat(s.root); serr != nil && err == nil && !slices.ContainsFunc(paths, func(p string) bool { return safefs.Within(p, s.root) }) {
		// No worktree ever made on this state folder, or none left in git.
		// One left registered after the folder was removed (to start over)
		// would fail the next run's first worktree: git refuses to check a
		// branch out twice. It is forgotten below.
		return
	}
	home := s.Home()
	// The home worktree outlives runs: a whole one is kept, with its notes.
	s.homeFound = s.findHome(ctx, paths)
	for _, path := range paths {
		if !safefs.Within(path, s.root) || (s.homeFound && path == home.Path) {
			continue
		}
		if err := s.git.RemoveWorktree(ctx, path); err != nil {
			s.log.Debug("git worktree remove failed; the folder is removed below", "worktree", path, "err", err)
		}
		removed = append(removed, path)
	}
	if n, ok := s.readNote(time.Now()); ok {
		s.sweepMerge(ctx, n, completed)
	}
	entries, err := os.ReadDir(s.root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("could not read the worktrees folder to empty it", "folder", s.root, "err", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), noteName+".corrupt-") {
			continue // an unreadable note, kept for the user to read
		}
		if e.Name() == asideName || (s.homeFound && (e.Name() == homeName || e.Name() == broughtName || e.Name() == linksName)) {
			continue // the home worktree and its notes
		}
		if err := removeTree(filepath.Join(s.root, e.Name())); err != nil {
			s.log.Warn("could not remove what an earlier run left in the worktrees folder; the next run tries again", "path", filepath.Join(s.root, e.Name()), "err", err)
		}
	}
	s.prune(ctx)
	if err := s.unexclude(ctx); err != nil {
		s.log.Warn("could not remove the worktree_link paths an earlier run named in info/exclude", "err", err)
	}
	branches, err := s.git.Branches(ctx, s.prefix)
	if err != nil {
		s.log.Warn("could not list the branches an earlier run may have left; the next run deletes them", "err", err)
	}
	var tasks []string // the branches of tasks of a block
	for _, b := range branches {
		if b != home.Branch {
			tasks = append(tasks, b)
		} else if s.homeFound {
			continue
		}
		if b == home.Branch && !s.git.IsAncestor(ctx, b, "HEAD") {
			// Work of the run's worktree that never reached the work tree
			// (the run died before it could be brought back): kept.
			if tip, err := s.git.Resolve(ctx, b, 8); err == nil {
				kept := keptName(-1, tip)
				if err := s.git.RenameBranch(ctx, b, kept); err == nil {
					s.log.Warn("an earlier run died with work in its worktree that had not reached the work tree: it is kept on a branch; merge it by hand if you want it", "branch", kept)
					continue
				}
			}
		}
		if err := s.git.DeleteBranch(ctx, b); err != nil {
			s.log.Warn("could not delete a branch an earlier run left; the next run tries again", "branch", b, "err", err)
		}
	}
	removed = slices.DeleteFunc(removed, func(p string) bool { return p == home.Path })
	if len(removed) > 0 || len(tasks) > 0 {
		s.log.Warn("removed the task worktrees and branches an earlier run left (it died in a parallel block); their tasks run again", "worktrees", len(removed), "branches", tasks)
	}
}

// sweepMerge undoes what the merge of an earlier run's task, named by its
// note, left: a merge half done, or a merge done whose task was never saved
// as completed (the run died while the merged tree's checks ran). The work
// of such a task is kept on a branch first. The caller holds mu.
func (s *Set) sweepMerge(ctx context.Context, n mergeNote, completed func(int) bool) {
	into := s.git
	if into.MergeInProgress(ctx) {
		s.log.Warn("undoing the merge of a task an earlier run left half done", "branch", n.Branch)
		if err := s.undoMerge(ctx); err != nil {
			s.log.Warn("could not undo the merge: run git merge --abort in the repository", "err", err)
		}
		return
	}
	if n.Before == "" || completed(n.Task) {
		return
	}
	// Only the merge commit itself is undone: HEAD must be it, on top of
	// the commit the tree was at before.
	if parent, err := into.Resolve(ctx, "HEAD^1", 0); err != nil || parent != n.Before {
		if head, herr := into.Head(ctx); herr == nil && head != n.Before {
			s.log.Warn("an earlier run left the merge of a task unchecked, and the work tree has moved on since: it is left as it is", "task", n.Task, "before", n.Before)
		}
		return
	}
	tip, err := into.Resolve(ctx, "HEAD^2", 8)
	if err != nil {
		s.log.Warn("could not keep the work of a merge an earlier run left unchecked; it is not undone", "task", n.Task, "err", err)
		return
	}
	kept := keptName(n.Task, tip)
	if err := into.SetBranch(ctx, kept, "HEAD^2"); err != nil {
		s.log.Warn("could not keep the work of a merge an earlier run left unchecked; it is not undone", "task", n.Task, "err", err)
		return
	}
	s.log.Warn("undoing the merge of a task an earlier run left before its checks had passed; its work is kept on a branch and the task runs again",
		"task", n.Task, "kept", kept)
	if err := into.ResetKeep(ctx, n.Before); err != nil {
		s.log.Warn("could not undo the merge: run git reset --keep "+n.Before+" in the repository", "err", err)
	}
}
