package runner

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"peal/internal/text"
	"peal/phase"
)

// runCommand runs a configured command (a post-run or worktree setup command)
// once, under the same supervision as an agent call; a non-zero exit or a
// timeout is an error naming the line that best explains it.
func runCommand(ctx context.Context, spec phase.Spec) (phase.Result, error) {
	res, err := phase.Run(ctx, spec)
	if err != nil {
		return res, err
	}
	return res, phase.CheckExit(res)
}

// maxLoggedOutput caps what the log shows of a post-run command's output.
const maxLoggedOutput = 2048

// postRun runs post_run_commands in the repo; each failure is a warning.
// They run after the tasks' work came back to the work tree, and may run
// what a task wrote there (a script, a build's output, node_modules/.bin):
// they are confined as checks at the work tree, unless post_run_confined
// is false.
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
		// No call-id scope: the command runs after the state folder is
		// released, and the next run on the folder must not take it for
		// what a dead run left.
		spec := r.caller.Command(phase.PostRun, argv, timeout)
		spec.Scope = ""
		if r.confined.PostRunConfined() {
			r.confineCommand(&spec)
		}
		res, err := runCommand(ctx, spec)
		level := slog.LevelInfo
		if err != nil {
			if line := r.confined.Refused(spec.Confine, spec.Dir, res, true, true).Line; line != "" {
				err = fmt.Errorf("%w; %s", err, line)
			}
			r.log.Warn("post-run command failed", "command", command, "err", err)
			level = slog.LevelWarn
		}
		// What the command printed is logged, as Peal did, so that a
		// post-run `stet finish` or report is visible in the run's log.
		for _, out := range []struct{ name, text string }{{"stdout", res.Stdout}, {"stderr", res.Stderr}} {
			if said := strings.TrimSpace(out.text); said != "" {
				r.log.Log(ctx, level, "post-run "+out.name, "command", command, out.name, text.Cap(said, maxLoggedOutput))
			}
		}
	}
}
