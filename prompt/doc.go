// Package prompt holds every prompt peal sends to an agent: plan, execute,
// normalize, address and triage. Payloads (task text, plan text, documents,
// review output, a failing check's output) sit between fence lines so that
// the agent can tell data from instructions. It builds strings and knows
// nothing of processes, plans or state.
package prompt
