package runner

import "peal/phase"

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
type Option func(*run)

// WithObserver makes obs hear of the plan's size and of every call.
func WithObserver(obs Observer) Option {
	return func(r *run) {
		r.observer = obs
		r.caller.Observer = obs
	}
}

// WithEnv adds variables to the environment of every child the run starts
// (agent, stet, git and post-run commands), on top of peal's own.
func WithEnv(kv ...string) Option {
	return func(r *run) { r.caller.Env = append(r.caller.Env, kv...) }
}
