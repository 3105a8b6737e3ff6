package runner

import (
	"context"
	"fmt"
	"strings"

	"peal/agentcall"
	"peal/config"
	"peal/phase"
	"peal/plan"
	"peal/worktree"
)

// The policy of the worktrees of parallel blocks (parallel_isolation =
// worktree): when a block may run in worktrees, how many of its tasks run
// at once for the disk, what a new worktree gets before the task's first
// agent call. Package worktree makes, merges and removes them.

// prepareTree gives a new worktree what git does not: the worktree_copy
// and worktree_link paths (see worktree.Set.Prepare), then
// worktree_setup_command run in it.
func (r *run) prepareTree(ctx context.Context, tt *worktree.Tree) error {
	if err := r.trees.Prepare(tt, r.cfg.WorktreeCopy, r.cfg.WorktreeLink); err != nil {
		return err
	}
	argv := strings.Fields(r.cfg.WorktreeSetupCommand)
	if len(argv) == 0 {
		return nil
	}
	r.log.Info("worktree setup command", "task", tt.Task, "command", r.cfg.WorktreeSetupCommand, "worktree", tt.Path)
	spec := r.caller.Command(phase.Setup, argv, r.caller.Limits.Timeout)
	spec.Dir = tt.Dir
	spec.Task = tt.Task
	r.confineCommand(&spec)
	res, err := runCommand(ctx, spec)
	end := agentcall.Succeeded
	if err != nil {
		end = agentcall.Failed
	}
	if line, _ := r.rec.Confined(spec.Confine, spec.Dir, tt.Task, res, end); line != "" && err != nil {
		err = &agentcall.ConfinedError{Err: err, Line: line}
	}
	if err != nil {
		if ctx.Err() != nil {
			return &phase.InterruptedError{Phase: phase.Setup, Cause: context.Cause(ctx)}
		}
		return fmt.Errorf("worktree_setup_command %q failed in %s: %w", r.cfg.WorktreeSetupCommand, tt.Dir, err)
	}
	return nil
}

// blockHasWorktrees reports whether a run of tasks may run a parallel block
// in worktrees: the only time worktree_link is used.
func (r *run) blockHasWorktrees(tasks []plan.Task) bool {
	if r.cfg.ParallelIsolation != config.IsolationWorktree {
		return false
	}
	for _, seg := range plan.Segments(tasks) {
		if r.runsAsBlock(seg, seg.Tasks) {
			return true
		}
	}
	return false
}

// setUp readies an isolated block before its first task starts
// (worktree.Set.OpenBlock). It returns how many tasks run at once; when
// none can start, every task fails with the reason in b.setUpErr, before
// any agent call.
func (b *block) setUp(ctx context.Context, base string) int {
	r := b.r
	want := min(int(r.cfg.MaxParallel), len(b.tasks))
	slots, err := r.trees.OpenBlock(ctx, base, want, r.cfg.WorktreeLink, r.disk)
	if err != nil {
		r.log.Error("no task of the block can start", "err", err)
		b.setUpErr = err
		return want
	}
	b.diskBound = slots < want
	return slots
}
