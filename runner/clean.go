package runner

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"peal/config"
	"peal/internal/gitrepo"
	"peal/phase"
	"peal/state"
	"peal/worktree"
)

// Clean removes what the runs on cfg's state folder keep between runs in
// the repository (the run's worktree, a killed block's worktrees, their
// branches) as far as none of it holds work found nowhere else
// (worktree.Set.Clean), under the state folder's lock: never while a run
// uses them. It starts git only.
func Clean(ctx context.Context, cfg *config.Config, log *slog.Logger) (worktree.Cleaned, error) {
	release, err := state.LockFolder(cfg.StateDir)
	if err != nil {
		return worktree.Cleaned{}, err
	}
	defer release()
	timeout := time.Duration(cfg.PhaseTimeoutSec) * time.Second
	caller := phase.Caller{Dir: cfg.RepoPath, Log: log, Scope: callScope(cfg.StateDir),
		Limits: phase.Limits{Timeout: timeout, KillGrace: time.Duration(cfg.KillGraceSec) * time.Second}}
	git := gitrepo.New(caller, log, timeout, cfg.RepoPath, cfg.StateDir, cfg.KnowledgeDir, cfg.AgentLogDir)
	return worktree.New(git, log, cfg.StateDir, caller.Scope, cfg.WorktreeSparsePaths).Clean(ctx, filepath.Join(cfg.StateDir, "tmp"))
}
