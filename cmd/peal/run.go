package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"peal/agentcall"
	"peal/check"
	"peal/config"
	"peal/internal/safefs"
	"peal/phase"
	"peal/runner"
	"peal/state"
)

// RunCmd is `peal run`.
type RunCmd struct {
	configFlags
	taskFlags
	RetryReset bool `help:"Back up the retry state of this run's tickets before it starts (fresh attempt 1, base models)."`
	DryRun     bool `help:"Print the schedule, every call's argv and model, then exit 0 without running anything or writing any file."`
	// NoProgress is a flag rather than a key: whether stderr shows live
	// lines concerns the terminal at hand, not the run.
	NoProgress bool `help:"Never draw live status lines on a terminal stderr (they are off anyway when stderr is not a terminal or TERM is dumb)."`
}

// taskFlags select the tasks of the plan.
type taskFlags struct {
	Task     *uint32 `help:"Run only task N." placeholder:"N" xor:"task-select"`
	FromTask *uint32 `help:"Run task N and every later task." placeholder:"N" xor:"task-select"`
}

// Run resolves the configuration, runs the plan and maps the result to an
// exit code: 0 done, 1 hard failure, 2 finished with issues, 3 stopped by the
// consecutive-failure cap or the cost cap, 4 agent or review model
// unreachable, 130/143/129 interrupted, 141 output lost.
func (c *RunCmd) Run(e *env) error {
	cfg, err := c.load(e)
	if err == nil {
		cfg.Task, cfg.FromTask, cfg.RetryReset, cfg.ReadOnly = c.Task, c.FromTask, c.RetryReset, c.DryRun
		err = cfg.ValidateWithoutAgent()
	}
	if err != nil {
		return failf("%v", err)
	}
	// The agent CLI is needed only to run: the dry run names a missing one
	// in a note and shows the argv with the command as configured.
	if err := cfg.ResolveAgents(); err != nil {
		if !c.DryRun {
			return failf("%v", err)
		}
		fmt.Fprintf(e.stdout, "note: %v; a real run stops here\n", err)
		if cfg.AgentPath == "" {
			cfg.AgentPath = cfg.AgentCmd
		}
		if cfg.FallbackPath == "" {
			cfg.FallbackPath = cfg.FallbackAgentCmd
		}
	}
	width, onTerminal := terminalWidth(e.stderr)
	stderr, opts := e.stderr, []runner.Option(nil)
	if prog := progressFor(e.stderr, e.environ, c.NoProgress || c.DryRun); prog != nil {
		// Log lines go through the display, which keeps them apart from the
		// status lines; it is cleared before the last line is printed.
		defer prog.Close()
		stderr, opts = prog, append(opts, runner.WithObserver(prog))
	}
	log, fileLog, closeLog, err := newLoggers(cfg, console{w: stderr, terminal: onTerminal, width: width}, c.DryRun)
	if err != nil {
		return failf("%v", err)
	}
	defer closeLog()
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	for _, n := range cfg.Notes {
		log.Info(n)
	}
	if c.DryRun {
		if err := runner.DryRun(cfg, log, e.stdout); err != nil {
			return failf("%v", err)
		}
		return nil
	}

	// The run's ending is worked out once: the record's last line and
	// peal's exit say the same, even if a signal comes in between.
	var code int
	var msg string
	known := false
	end := func(out runner.Outcome, err error) (int, string) {
		code, msg = ending(e.ctx, cfg, out, err)
		known = true
		return code, msg
	}
	out, err := runner.Run(e.ctx, cfg, log, append(opts, runner.WithEnding(end))...)
	if !known {
		end(out, err)
	}
	switch {
	case err != nil:
		fileLog.Error(msg, "exit_code", code)
		return &exitError{code: code, msg: msg}
	case code == runner.ExitWithIssues:
		fileLog.Warn(msg, "exit_code", code)
		return &exitError{code: code, msg: msg}
	}
	log.Info("run finished", "completed", out.Completed)
	return nil
}

// ending is a run's exit code and the one line peal ends it with ("" for a
// run that completed every task).
func ending(ctx context.Context, cfg *config.Config, out runner.Outcome, err error) (int, string) {
	if err != nil {
		return failure(ctx, cfg, err)
	}
	if out.ExitCode == runner.ExitWithIssues {
		var issues []string
		for _, c := range []struct {
			what  string
			tasks []int
		}{{"failed", out.Failed}, {"left with findings", out.WithFindings}, {"deferred", out.Deferred}, {"skipped (retries used up)", out.Skipped},
			{"whose checks still fail", out.ChecksFailed}} {
			if len(c.tasks) > 0 {
				issues = append(issues, taskList(c.tasks)+" "+c.what)
			}
		}
		if len(out.ChecksFailing) > 0 {
			issues = append(issues, "the final tree fails the checks "+check.Quoted(out.ChecksFailing))
		}
		return out.ExitCode, fmt.Sprintf("finished with issues: %s (summary: %s)", strings.Join(issues, "; "), cfg.RunSummaryPath)
	}
	return out.ExitCode, ""
}

// taskList names tasks for a person: "task 2", "tasks 2, 3".
func taskList(tasks []int) string {
	if len(tasks) == 1 {
		return fmt.Sprintf("task %d", tasks[0])
	}
	parts := make([]string, len(tasks))
	for i, t := range tasks {
		parts[i] = strconv.Itoa(t)
	}
	return "tasks " + strings.Join(parts, ", ")
}

// failure maps a run error to its exit code and one-line message.
func failure(ctx context.Context, cfg *config.Config, err error) (int, string) {
	var sc *signalCause
	if errors.As(context.Cause(ctx), &sc) && ctx.Err() != nil {
		if sc.sig == syscall.SIGPIPE {
			return 128 + int(sc.sig), fmt.Sprintf("stopped: peal's output has no reader any more (SIGPIPE); running agents were stopped and the state was saved in %s",
				filepath.Join(cfg.StateDir, state.FileName))
		}
		return 128 + int(sc.sig), fmt.Sprintf("interrupted by %s: running agents were stopped and the state was saved in %s",
			signalName(sc.sig), filepath.Join(cfg.StateDir, state.FileName))
	}
	var unreachable *phase.UnreachableError
	var rateLimited *phase.RateLimitError
	if errors.As(err, &unreachable) || errors.As(err, &rateLimited) {
		return runner.ExitUnreachable, "error: " + err.Error() + fmt.Sprintf(" (run stopped; state saved in %s)", filepath.Join(cfg.StateDir, state.FileName))
	}
	var stopped *runner.StoppedError
	var costly *agentcall.CostLimitError
	if errors.As(err, &stopped) || errors.As(err, &costly) {
		return runner.ExitStoppedEarly, "error: " + err.Error()
	}
	return runner.ExitFailure, "error: " + err.Error()
}

// console is where the log of a run goes for the person or the program that
// started it: stderr (or the progress display on it), whether it is a
// terminal, and its width.
type console struct {
	w        io.Writer
	terminal bool
	width    func() int
}

// handler is the console's log handler at level, in the form log_format
// names: on a terminal, auto is the human form.
func (c console) handler(format config.LogFormat, level slog.Level) slog.Handler {
	switch {
	case format == config.LogJSON:
		return slog.NewJSONHandler(c.w, &slog.HandlerOptions{Level: level})
	case format == config.LogHuman || format == config.LogAuto && c.terminal:
		return newHumanHandler(c.w, level, c.width)
	}
	return slog.NewTextHandler(c.w, &slog.HandlerOptions{Level: level, ReplaceAttr: roundDurations})
}

// newLoggers builds the run's logger: on stderr at log_level, in the form
// of log_format, and, with log_file, JSON lines appended to that file. The
// file gets every record, debug included, whatever log_level says, as
// Peal's did: a quiet console and a complete file for after the run.
// fileLog writes to the file only (or nowhere), for records that stderr
// already shows as a plain line. A dry run writes no file, the log file
// included.
func newLoggers(cfg *config.Config, stderr console, dryRun bool) (log, fileLog *slog.Logger, closeFn func(), err error) {
	text := stderr.handler(cfg.LogFormat, slogLevel(cfg.LogLevel))
	if cfg.LogFile == "" || dryRun {
		return slog.New(text), slog.New(slog.DiscardHandler), func() {}, nil
	}
	f, err := safefs.OpenAppend(cfg.LogFile)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("log file %s cannot be opened: %w (check %s)", cfg.LogFile, safefs.Reason(err), config.Describe("log_file", cfg.Sources))
	}
	jsonHandler := slog.NewJSONHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug})
	return slog.New(slog.NewMultiHandler(text, jsonHandler)), slog.New(jsonHandler), func() { f.Close() }, nil
}

// slogLevel maps a resolved log_level (one of config.LogLevels) to slog's;
// "off" is above every record's level.
func slogLevel(s string) slog.Level {
	switch s {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	case "off":
		return slog.LevelError + 100
	}
	return slog.LevelInfo
}

// roundDurations shows durations in the text log in seconds, rounded
// ("0.94 s" rather than "941.297198ms"); the JSON log keeps nanoseconds.
func roundDurations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(formatDuration(a.Value.Duration()))
	}
	return a
}

// formatDuration writes d in seconds: whole seconds as they are ("30 s"),
// others with two decimals ("0.94 s").
func formatDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
