package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"peal/plan"
	"strings"

	"peal/agentcall"
	"peal/config"
	"peal/internal/gitrepo"
	"peal/phase"
	"peal/worktree"
)

// The policy of the worktrees of parallel blocks (parallel_isolation =
// worktree): when a block may run in worktrees, how many of its tasks run
// at once for the disk, what a new worktree gets before the task's first
// agent call. Package worktree makes, merges and removes them.

// worktreeBase is the commit the worktrees of a block start from: the work
// tree's HEAD, when the tree is clean. why says otherwise why the block
// cannot be isolated.
func (r *run) worktreeBase(ctx context.Context) (base, why string) {
	head, err := r.main.git.Head(ctx)
	if err != nil {
		return "", "the repository has no commit yet"
	}
	changes, err := r.main.git.Changes(ctx)
	switch {
	case err != nil:
		return "", err.Error()
	case len(changes) > 0:
		return "", fmt.Sprintf("the work tree has uncommitted changes (%s), which a worktree would not hold", gitrepo.ListPaths(changes, 3))
	}
	// A task's own worktree would hold a submodule as an empty folder, where
	// its work would be lost: the block works where the submodules are.
	switch subs, err := r.main.git.Submodules(ctx); {
	case err != nil:
		return "", err.Error()
	case len(subs) > 0:
		paths := make([]string, len(subs))
		for i, s := range subs {
			paths[i] = s.Path
		}
		return "", fmt.Sprintf("the work tree has submodules checked out (%s), which a worktree of a task's own would hold empty", gitrepo.ListPaths(paths, 3))
	}
	return head, ""
}

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

// endLinks removes the block's section of info/exclude once its worktrees
// are gone.
func (b *block) endLinks(ctx context.Context) {
	r := b.r
	cctx, cancel := r.trees.CleanupContext(ctx)
	defer cancel()
	if err := r.trees.Unexclude(cctx); err != nil {
		r.log.Warn("could not remove the worktree_link paths from info/exclude; the next run removes them", "err", err)
	}
}

// diskReserve is the space a block leaves free, beyond its worktrees, for
// what its tasks write (builds, caches, logs).
const diskReserve = 64 << 20

// setUp readies an isolated block before its first task starts: git
// is checked for sparse worktrees, the worktree_link paths are checked and
// named in info/exclude, and the disk is asked how many worktrees it
// holds. It returns how many tasks run at once; when none can start, every
// task fails with the reason in b.setUpErr, before any agent call.
func (b *block) setUp(ctx context.Context, base string) int {
	r := b.r
	want := min(int(r.cfg.MaxParallel), len(b.tasks))
	var err error
	if r.trees.Sparse() {
		err = r.trees.CheckGit(ctx)
	}
	slots := want
	if err == nil {
		slots, err = b.slots(ctx, base, len(b.tasks))
	}
	if err == nil && len(r.cfg.WorktreeLink) > 0 {
		if err = r.trees.CheckLinks(ctx, r.cfg.WorktreeLink); err == nil {
			err = r.trees.Exclude(ctx, r.cfg.WorktreeLink)
		}
	}
	if err != nil {
		r.log.Error("no task of the block can start", "err", err)
		b.setUpErr = err
		return want
	}
	b.diskBound = slots < want
	return slots
}

// slots is how many tasks of a block of n run at once: max_parallel,
// or fewer when the file system of the worktrees cannot hold that many of
// them, leaving diskReserve free; 0, with the error to fail the block's
// tasks with, when not even one fits. A system that does not tell its free
// space is trusted.
func (b *block) slots(ctx context.Context, base string, n int) (int, error) {
	r := b.r
	want := min(int(r.cfg.MaxParallel), n)
	where := r.trees.Root()
	if _, err := os.Stat(where); err != nil {
		where = filepath.Dir(where) // the state folder: the worktrees folder is made in it
	}
	disk := r.disk
	if disk == nil {
		disk = worktree.StatDisk
	}
	space, err := disk(where)
	if err != nil {
		r.log.Debug("no disk check before the block", "worktrees", where, "err", err)
		return want, nil
	}
	// stet makes no worktree of its own here: a task's review session
	// starts at the commit its worktree starts from, where stet has
	// nothing to check out.
	per, err := r.trees.Size(ctx, base, space.Block)
	if err != nil {
		return 0, err
	}
	fits := 0
	if space.Free > diskReserve {
		fits = int(min((space.Free-diskReserve)/per.Bytes, uint64(want)))
	}
	if space.Files > 0 {
		fits = min(fits, int(min(space.Files/per.Files, uint64(want))))
	}
	dir := filepath.Dir(r.trees.Root())
	switch {
	case fits == 0:
		files := ""
		if space.Files > 0 {
			files = fmt.Sprintf(" and %d files", space.Files)
		}
		return 0, fmt.Errorf("not enough disk space for one task's worktree in %s: a worktree takes about %s in %d files and folders, and %s%s are free, of which %s stay free for the tasks' own writes; free some space, set worktree_sparse_paths, or set parallel_isolation = shared",
			dir, byteSize(per.Bytes), per.Files, byteSize(space.Free), files, byteSize(diskReserve))
	case fits < want:
		r.log.Warn("not enough disk space for every task of the block at once: fewer run at a time", "at_once", fits, "would_run", want,
			"per_task", byteSize(per.Bytes), "per_task_files", per.Files, "free", byteSize(space.Free), "free_files", space.Files, "worktrees", dir)
	}
	return fits, nil
}

// byteSize is n bytes for a person to read.
func byteSize(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n)/unit, "KiB"
	for _, s := range []string{"MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, suffix = v/unit, s
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}
