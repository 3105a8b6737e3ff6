package runner

import (
	"context"
	"peal/plan"
	"time"

	"peal/agent"
	"peal/phase"
	"peal/worktree"
)

// Observer hears what a run is doing while it runs, e.g. to draw progress on
// a terminal. Its methods are called from the run's goroutines (several at
// once in a parallel block) and must return quickly.
type Observer interface {
	// CallStarted hears of every supervised call the run makes: agent calls
	// of every phase and attempt, stet, git and post-run commands.
	phase.Observer
	// PlanLoaded is told how many tasks the plan has (before --task or
	// --from-task select some), once, before the first task runs.
	PlanLoaded(tasks int)
}

// Option adjusts a run in ways the configuration does not describe, because
// they concern the process around it rather than the plan.
type Option func(*settings)

// settings are what a run takes beyond its configuration: who hears of it,
// and the stand-ins and hooks of the tests.
type settings struct {
	// observer hears of the plan's size and of every call (nil: none).
	observer Observer
	// ending names the exit code and reason of the run record's last line.
	ending func(Outcome, error) (int, string)
	// env is added to the environment of every child the run starts.
	env []string
	// linger is how long an agent may go on after its final result event.
	linger time.Duration
	// sleep waits between the attempts of an agent call (nil: a timer).
	sleep func(context.Context, time.Duration) error
	// disk tells the free space where worktrees go (nil: worktree.StatDisk).
	disk func(dir string) (worktree.Space, error)
	// lookPath finds stet on PATH (nil: the process's PATH).
	lookPath func(string) (string, error)
	// launchGap, when set, replaces the agent kinds' gaps between parallel
	// launches.
	launchGap func(*agent.Kind) time.Duration
	// taskStart, when set, runs at the start of every task (sequential or
	// in a parallel block); callStart at the start of every agent call.
	// Tests use them to make a task or a call panic.
	taskStart func(plan.Task)
	callStart func(name phase.Name, task int)
	// ticketClosed, when set, runs when a task's ticket attempt has ended,
	// before its outcome is saved.
	ticketClosed func(plan.Task)
	// unenforced makes the run confine as a machine whose kernel confines
	// no files would (macOS, an older Linux): the guard and the allowed
	// environment, and no Landlock rules.
	unenforced bool
	// gitTimeout, when set, bounds peal's own git commands (and the
	// clean-ups made of them) instead of phase_timeout_sec: a test that
	// times an agent, stet or setup call out after a second keeps git's
	// bookkeeping out of that second, which a loaded machine can pass.
	gitTimeout time.Duration
}

// WithObserver makes obs hear of the plan's size and of every call.
func WithObserver(obs Observer) Option {
	return func(s *settings) { s.observer = obs }
}

// WithEnding gives the run the function that turns its outcome into the exit
// code and the one-line reason peal prints, for the last line of the run
// record.
func WithEnding(end func(Outcome, error) (int, string)) Option {
	return func(s *settings) { s.ending = end }
}
