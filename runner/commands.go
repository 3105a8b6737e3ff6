package runner

import (
	"context"
	"strings"
	"time"

	"peal/phase"
)

// command runs one non-agent child (git, a post-run command) once, under the
// same supervision as an agent call.
func (r *run) command(ctx context.Context, name string, argv []string, timeout time.Duration) (phase.Result, error) {
	spec := r.caller.Spec(name, phase.NoTask, phase.Attempt{N: 1, Of: 1}, argv, false)
	spec.Env = r.caller.Env // no PEAL_* call context: these are not agent calls
	spec.Timeout = timeout
	res, err := phase.Run(ctx, spec)
	if err != nil {
		return res, err
	}
	return res, phase.CheckExit(res)
}

// postRun runs post_run_commands in the repo; each failure is a warning.
func (r *run) postRun(ctx context.Context) {
	timeout := r.caller.Limits.Timeout
	if t := r.cfg.PostRunTimeoutSec; t != nil {
		timeout = time.Duration(*t) * time.Second
	}
	for _, command := range r.cfg.PostRunCommands {
		argv := strings.Fields(command)
		if len(argv) == 0 {
			continue
		}
		r.log.Info("post-run command", "command", command)
		if _, err := r.command(ctx, "post-run", argv, timeout); err != nil {
			r.log.Warn("post-run command failed", "command", command, "err", err)
		}
	}
}
