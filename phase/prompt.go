package phase

import "strings"

// Every prompt sent to the agent is built in this file. Payloads (task text,
// plan text, documents, review output) sit between fence lines so that the
// agent can tell data from instructions.

const (
	fenceTask = "---TASK---"
	fencePlan = "---PLAN---"
	fenceDoc  = "---DOC---"
)

func fenced(fence, payload string) string {
	return fence + "\n" + payload + "\n" + fence
}

// PlanPrompt asks for a plan of one task.
func PlanPrompt(task string) string {
	return "Write an implementation plan for the task between the fence lines. " +
		"Reply with the plan only.\n\n" + fenced(fenceTask, task)
}

// ExecutePrompt asks the agent to carry out a plan.
func ExecutePrompt(plan string) string {
	return "Carry out the plan between the fence lines: implement it and run the tests. " +
		"Do not write a new plan.\n\n" + fenced(fencePlan, plan)
}

// DefaultNormalizeTemplate converts a free-form document into the plan format;
// {{DOC}} stands for the document.
const DefaultNormalizeTemplate = "Rewrite the document between the fence lines as a task plan. " +
	"Each task starts with a heading line of the form `## Task N` (N = 1, 2, 3, ...), " +
	"optionally followed by ` (parallel)` when it may run at the same time as its neighbours, " +
	"and its description follows under the heading. Print only the plan.\n\n" +
	fenceDoc + "\n{{DOC}}\n" + fenceDoc

// NormalizePrompt fills the template ("" for the built-in one) with the document.
func NormalizePrompt(template, doc string) string {
	if template == "" {
		template = DefaultNormalizeTemplate
	}
	if !strings.Contains(template, "{{DOC}}") {
		return template + "\n\n" + fenced(fenceDoc, doc)
	}
	return strings.ReplaceAll(template, "{{DOC}}", doc)
}

const (
	fenceStet        = "---STET---"
	fenceSuggestions = "---SUGGESTIONS---"
)

// TriageQuestion ends the triage prompt; the answer decides what is dismissed.
const TriageQuestion = "Anything to address from this review?"

// AddressPrompt asks the agent to fix the findings of a review; suggestions
// (one per line) get their own fenced block when there are any.
func AddressPrompt(review string, suggestions []string) string {
	p := "Fix the findings of the code review between the fence lines, then run the tests.\n\n" + fenced(fenceStet, review)
	if len(suggestions) > 0 {
		p += "\n\nThe reviewer suggested these changes, one per line:\n\n" + fenced(fenceSuggestions, strings.Join(suggestions, "\n"))
	}
	return p
}

// TriagePrompt asks whether a review has anything worth addressing.
func TriagePrompt(review string) string {
	return "Read the code review between the fence lines and say which findings, by id, really need a fix; " +
		"say \"nothing to address\" if none do.\n\n" + fenced(fenceStet, review) + "\n\n" + TriageQuestion
}
