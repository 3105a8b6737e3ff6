// Package agentcall owns one call of an agent CLI, from the request to its
// answer: which agent of the run (the primary, or the fallback of even
// attempts) and which model each attempt uses, the session the call begins
// or continues (agent_session = "task"), the call's confinement at its
// site, the watch of its output, the tokens and cost it reports, and the
// retries of the call under the run's policy for agent calls.
//
// Its words:
//   - an Agents is the run's agent CLIs and what it learnt of them (the
//     models an API does not know, an account out of quota, the usage so
//     far), made once per run by New from its dependencies;
//   - a side is one agent of the run, by role (phase.RolePrimary,
//     phase.RoleFallback);
//   - a Site is where a call runs: its folder and observer (a phase.Caller),
//     and how a call there is confined;
//   - an attempt is one try of a call, a value that holds its state (the
//     side, the session, the watcher, the confinement) while the retry
//     loop runs it;
//   - a Recorder hears of what a call reported (usage) and was refused
//     (denials), for the run record.
//
// It knows nothing of plans, tickets or the schedule: the run gives it the
// model of each call (escalation is the run's) and the variables of a task.
package agentcall
