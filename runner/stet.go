package runner

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"peal/config"
	"peal/phase"
)

// stetClient runs the review side of Phase 3: the built-in stet sequence
// (start, run, dismiss, finish) or the custom stet_commands. Every call is a
// supervised child under the phase timeout.
type stetClient struct {
	r        *run
	path     string     // stet binary (built-in mode)
	commands [][]string // stet_commands split exec-style (custom mode)
}

// resolveStet decides whether this run has Phase 3 and how it reviews.
// A stet_path that is not an executable file is a warning and no Phase 3; no
// stet on PATH means no Phase 3 either.
func (r *run) resolveStet() *stetClient {
	if len(r.cfg.StetCommands) > 0 {
		s := &stetClient{r: r}
		for _, c := range r.cfg.StetCommands {
			if argv := strings.Fields(c); len(argv) > 0 {
				s.commands = append(s.commands, argv)
			}
		}
		if len(s.commands) > 0 {
			return s
		}
	}
	if p := r.cfg.StetPath; p != "" {
		info, err := os.Stat(p)
		if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
			r.log.Warn("stet_path is not an executable file: Phase 3 is skipped for this run", "stet_path", p)
			return nil
		}
		return &stetClient{r: r, path: p}
	}
	p, err := config.ResolveCommand("stet")
	if err != nil {
		r.log.Info("stet not found on PATH: Phase 3 is skipped for this run")
		return nil
	}
	return &stetClient{r: r, path: p}
}

// builtin reports whether the built-in stet sequence is used (triage,
// dismiss and finish exist only there).
func (s *stetClient) builtin() bool { return len(s.commands) == 0 }

// attempts is how many times one stet call is tried under on_stet_fail.
func (s *stetClient) attempts() int {
	if s.r.cfg.OnStetFail == "retry_once" {
		return 2
	}
	return 1
}

// call runs one stet (or custom review) command with its retries; failure
// says which results count as failures.
func (s *stetClient) call(ctx context.Context, task int, argv []string, failure func(phase.Result) error, attempts int) (phase.Result, error) {
	log := s.r.log.With("task", task)
	res, _, err := phase.Do(ctx, log, phase.Policy{Attempts: attempts, Failure: failure}, func(a phase.Attempt) phase.Spec {
		return s.r.caller.Spec("stet", task, a, argv, false)
	})
	return res, err
}

// onlyTimeout: a review's non-zero exit means findings, as for a linter; only
// a timeout is a failure.
func onlyTimeout(res phase.Result) error {
	if res.TimedOut {
		return phase.CheckExit(res)
	}
	return nil
}

// start opens the review session once per run, before the first task.
func (s *stetClient) start(ctx context.Context) error {
	if !s.builtin() {
		for _, argv := range s.commands {
			if _, err := s.call(ctx, phase.NoTask, argv, nil, s.attempts()); err != nil {
				return fmt.Errorf("stet command %q at session start: %w", strings.Join(argv, " "), err)
			}
		}
		return nil
	}
	if _, err := s.call(ctx, phase.NoTask, s.startArgv(), nil, s.attempts()); err != nil {
		return fmt.Errorf("stet start: %w", err)
	}
	return nil
}

// startArgv is `stet start [ref] [extra args]` (built-in mode).
func (s *stetClient) startArgv() []string {
	argv := []string{s.path, "start"}
	if ref := s.r.cfg.StetStartRef; ref != "" {
		argv = append(argv, ref)
	}
	return append(argv, s.r.cfg.StetStartExtraArgs...)
}

// reviewArgv is the review command: `stet run --output=json [extra args]`,
// or the last custom command.
func (s *stetClient) reviewArgv() []string {
	if !s.builtin() {
		return s.commands[len(s.commands)-1]
	}
	return append([]string{s.path, "run", "--output=json"}, s.r.cfg.StetRunExtraArgs...)
}

// review runs the review of a task and applies the findings heuristic.
func (s *stetClient) review(ctx context.Context, task int) (Review, error) {
	argv := s.reviewArgv()
	res, err := s.call(ctx, task, argv, onlyTimeout, s.attempts())
	if err != nil {
		return Review{}, fmt.Errorf("review (%s): %w", strings.Join(argv[1:], " "), err)
	}
	rv := ParseReview(res.Stdout, res.ExitCode)
	rv.Stderr = res.Stderr
	s.r.log.Info("review finished", "task", task, "findings", rv.Present, "count", rv.Count(), "exit_code", res.ExitCode)
	return rv, nil
}

// dismiss runs `stet dismiss ID REASON`; a failure is only a warning.
func (s *stetClient) dismiss(ctx context.Context, task int, d dismissal) {
	if _, err := s.call(ctx, task, []string{s.path, "dismiss", d.ID, d.Reason}, nil, 1); err != nil {
		s.r.log.Warn("stet dismiss failed, continuing", "task", task, "id", d.ID, "reason", d.Reason, "err", err)
	}
}

// finish closes the session (built-in mode). It runs even after a failure or
// a signal, under its own deadline; a failure is only a warning.
func (s *stetClient) finish(ctx context.Context) {
	if !s.builtin() {
		return
	}
	timeout := s.r.caller.Limits.Timeout
	if ctx.Err() != nil {
		// Interrupted: finish best-effort, without holding peal up for long.
		timeout = min(timeout, 30*time.Second)
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if _, err := s.call(fctx, phase.NoTask, []string{s.path, "finish"}, nil, 1); err != nil {
		s.r.log.Warn("stet finish failed", "err", err)
	}
}
