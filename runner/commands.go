package runner

import (
	"context"
	"fmt"
	"strconv"
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

// commit records the work of tasks after their execute: `git add -A` and one
// commit, whose message quotes planText (the lowest task's). "nothing to
// commit" is not an error.
func (r *run) commit(ctx context.Context, tasks []int, planText string) error {
	timeout := r.caller.Limits.Timeout
	if _, err := r.command(ctx, "git", []string{"git", "add", "-A"}, timeout); err != nil {
		return fmt.Errorf("git add -A failed: %w", err)
	}
	msg := fmt.Sprintf("peal: %s - %s", commitSubject(tasks), firstLine(planText, 80))
	res, err := r.command(ctx, "git", []string{"git", "commit", "-m", msg}, timeout)
	if err != nil {
		if out := res.Stdout + res.Stderr; strings.Contains(out, "nothing to commit") || strings.Contains(out, "nothing added to commit") {
			r.log.Info("nothing to commit after execute", "tasks", tasks)
			return nil
		}
		return fmt.Errorf("git commit failed (check git user.name/user.email and hooks in the repo): %w", err)
	}
	r.log.Info("committed after execute", "tasks", tasks, "message", msg)
	return nil
}

// commitSubject names the tasks of a commit: "task 2" for one task (the
// sequential format of A8), "tasks 2, 3, 5" for a parallel block.
func commitSubject(tasks []int) string {
	if len(tasks) == 1 {
		return fmt.Sprintf("task %d", tasks[0])
	}
	parts := make([]string, len(tasks))
	for i, t := range tasks {
		parts[i] = strconv.Itoa(t)
	}
	return "tasks " + strings.Join(parts, ", ")
}

// firstLine is the first non-blank line of s, cut to n characters.
func firstLine(s string, n int) string {
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			if rs := []rune(line); len(rs) > n {
				return strings.TrimSpace(string(rs[:n]))
			}
			return line
		}
	}
	return ""
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
