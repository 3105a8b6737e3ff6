package main

import (
	"fmt"
	"log/slog"
	"os"

	"peal/config"
	"peal/worktree"
)

// CleanCmd is `peal clean`: what the runs on a state folder keep in the
// repository between runs, removed as far as it holds no work of its own.
type CleanCmd struct {
	configFlags
}

// Run removes and says, a line each, what it removed, what it left and
// why, and the branches peal kept for the user, which it never removes.
func (c *CleanCmd) Run(e *env) error {
	in := c.inputs(e)
	in.DefaultRepo = "."
	cfg, err := config.Load(in)
	if err == nil {
		err = cfg.ResolvePaths()
	}
	if err == nil {
		if info, serr := os.Stat(cfg.RepoPath); serr != nil || !info.IsDir() {
			err = fmt.Errorf("repo folder %s does not exist: check %s", cfg.RepoPath, config.Describe("repo_path", cfg.Sources))
		}
	}
	if err != nil {
		return failf("%v", err)
	}
	warn(e, cfg.Warnings)
	done, err := worktree.CleanRuns(e.ctx, cfg, slog.New(slog.DiscardHandler))
	for _, r := range done.Removed {
		fmt.Fprintf(e.stdout, "removed: %s\n", r)
	}
	for _, l := range done.Left {
		fmt.Fprintf(e.stdout, "left: %s\n", l)
	}
	for _, k := range done.Kept {
		fmt.Fprintf(e.stdout, "kept for you: branch %s (peal never deletes it: git branch -D %s once you no longer want it)\n", k, k)
	}
	if err != nil {
		return failf("%v", err)
	}
	if len(done.Removed)+len(done.Left)+len(done.Kept) == 0 {
		fmt.Fprintf(e.stdout, "nothing to clean: no worktree or branch of the runs on %s in the repository\n", cfg.StateDir)
	}
	return nil
}
