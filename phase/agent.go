package phase

import (
	"log/slog"
	"strconv"
	"time"
)

// Limits are the time limits every call of a run shares.
type Limits struct {
	Timeout, Idle, KillGrace time.Duration
}

// CallEnv is the context a child sees in its environment (PEAL_PHASE,
// PEAL_TASK_INDEX, PEAL_ATTEMPT). A call of NoTask gets no PEAL_TASK_INDEX.
func CallEnv(phaseName Name, task int, attempt int) []string {
	env := []string{"PEAL_PHASE=" + string(phaseName), "PEAL_ATTEMPT=" + strconv.Itoa(attempt)}
	if task != NoTask {
		env = append(env, "PEAL_TASK_INDEX="+strconv.Itoa(task))
	}
	return env
}

// Caller turns an argv into the Spec of one attempt, adding the working
// folder, the limits and the environment of every call.
type Caller struct {
	Dir      string
	Limits   Limits
	Log      *slog.Logger
	Env      []string // added to every call (e.g. PEAL_TICKET_ID)
	Observer Observer // given to every call; nil: none
	Recorder Recorder // given to every call; nil: none
	Scope    string   // the call-id scope of every call (see Spec.Scope)
}

// Spec is the Spec of attempt a of a call of the given phase for task.
func (c Caller) Spec(phase Name, task int, a Attempt, argv []string, prompt bool) Spec {
	env := append(CallEnv(phase, task, a.N), c.Env...)
	if prompt && a.Role != "" {
		env = append(env, "PEAL_AGENT_ROLE="+string(a.Role))
	}
	return Spec{
		Phase: phase, Argv: argv, Prompt: prompt, Dir: c.Dir, Env: env,
		Timeout: c.Limits.Timeout, IdleTimeout: c.Limits.Idle, KillGrace: c.Limits.KillGrace,
		Log: c.Log, Attempt: a, Task: task, Observer: c.Observer, Recorder: c.Recorder, Scope: c.Scope,
	}
}

// Command is the Spec of a call that is no agent call (git, a post-run
// command): run once, with no PEAL_* call context, under timeout and
// without the idle timeout, which is for agents (a build may well be silent).
func (c Caller) Command(name Name, argv []string, timeout time.Duration) Spec {
	spec := c.Spec(name, NoTask, Attempt{N: 1, Of: 1}, argv, false)
	spec.Env = c.Env
	spec.Timeout = timeout
	spec.IdleTimeout = 0
	return spec
}
