package main

import (
	"fmt"

	"peal/config"
	"peal/doctor"
	"peal/runner"
)

// DoctorCmd is `peal doctor`: are the agent CLI and stet ready for a run?
type DoctorCmd struct {
	configFlags
}

// Run prints one line per check and exits 1 when any check failed.
func (c *DoctorCmd) Run(e *env) error {
	// The project doctor checks is the one it is started in, unless
	// repo_path names another, as for the retry-state commands.
	in := c.inputs(e)
	in.DefaultRepo = "."
	cfg, err := config.Load(in)
	if err == nil {
		err = cfg.ResolvePaths()
	}
	if err != nil {
		return &exitError{code: runner.ExitFailure, msg: "error: " + err.Error()}
	}
	warn(e, cfg.Warnings)
	failed := 0
	for _, ch := range doctor.Check(e.ctx, cfg, e.environ) {
		fmt.Fprintf(e.stdout, "%-4s  %s: %s\n", ch.Status, ch.Name, ch.Detail)
		for _, it := range ch.Items {
			fmt.Fprintf(e.stdout, "        %s\n", it)
		}
		if ch.Status == doctor.Fail {
			failed++
		}
	}
	if failed > 0 {
		return &exitError{code: runner.ExitFailure, msg: fmt.Sprintf("error: %d check(s) failed", failed)}
	}
	return nil
}
