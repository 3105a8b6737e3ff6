package runner

import (
	"errors"
	"fmt"

	"peal/check"
	"peal/config"
	"peal/state"
	"peal/worktree"
)

// What a merge conflict is and does, in one place. The merge of a task of
// a parallel block into the work tree is undone, and the task's work kept
// on a branch, when git cannot merge it (a *worktree.ConflictError) or when
// the merged tree fails checks that did not fail before (a
// *checksConflict). What either does to the task is parallel_conflict's:
// under retry the task runs again, alone, after the block, on the work
// merged so far; under fail it fails.

// conflict is a merge undone, of either kind.
type conflict interface {
	error
	// record is the one shape the state keeps of it; setBranch names the
	// branch that keeps the task's work, once it is kept.
	record() state.Conflict
	branch() string
	setBranch(string)
}

// checksConflict: the task's work merged without a conflict, and the
// merged tree failed checks that did not fail before.
type checksConflict struct {
	Task   int
	Branch string
	Checks []check.Result
}

func (e *checksConflict) Error() string {
	return fmt.Sprintf("merging task %d into the work tree made the checks fail: %s; the merge was undone and the task's work is kept on branch %s (parallel_conflict)",
		e.Task, check.Summaries(e.Checks, 3), e.Branch)
}

func (e *checksConflict) record() state.Conflict {
	var c state.Conflict
	for _, r := range e.Checks {
		c.Checks = append(c.Checks, r.Command)
	}
	return c
}
func (e *checksConflict) branch() string     { return e.Branch }
func (e *checksConflict) setBranch(b string) { e.Branch = b }

// gitConflict is a *worktree.ConflictError as a conflict.
type gitConflict struct{ *worktree.ConflictError }

func (e gitConflict) record() state.Conflict {
	return state.Conflict{Files: e.Files, Detail: e.Detail}
}
func (e gitConflict) branch() string     { return e.Branch }
func (e gitConflict) setBranch(b string) { e.Branch = b }
func (e gitConflict) Unwrap() error      { return e.ConflictError }

// asConflict is err as a conflict, when it is one.
func asConflict(err error) (conflict, bool) {
	var g *worktree.ConflictError
	var c *checksConflict
	switch {
	case errors.As(err, &g):
		return gitConflict{g}, true
	case errors.As(err, &c):
		return c, true
	}
	return nil, false
}

// conflictAction is what a conflict does to its task: parallel_conflict.
type conflictAction config.ConflictAction

// retries reports whether a conflicting task runs again, alone, after its
// block; fails whether the conflict is the task's failure at once.
func (p conflictAction) retries() bool { return config.ConflictAction(p) == config.ConflictRetry }
func (p conflictAction) fails() bool   { return config.ConflictAction(p) == config.ConflictFail }

// describe says what a conflict does to the task, for the dry run.
func (p conflictAction) describe() string {
	if p.retries() {
		return "the task runs again, alone, in the work tree after the block"
	}
	return "the task fails"
}
