package prompt

import (
	"fmt"
	"strings"
)

const (
	fenceTask = "---TASK---"
	fencePlan = "---PLAN---"
	fenceDoc  = "---DOC---"
)

func fenced(fence, payload string) string {
	return fence + "\n" + payload + "\n" + fence
}

// Plan asks for a plan of one task.
func Plan(task string) string {
	return "Write an implementation plan for the task between the fence lines. " +
		"Reply with the plan only.\n\n" + fenced(fenceTask, task)
}

// Execute asks the agent to carry out a plan.
func Execute(plan string) string {
	return "Carry out the plan between the fence lines: implement it and run the tests. " +
		"Do not write a new plan.\n\n" + fenced(fencePlan, plan)
}

// PutBack opens the prompt of a call that continues a conversation whose
// work did not stay: the task did not complete, its changes were kept
// aside for the user and the tree put back as it was before the task. The
// agent must not take its earlier work for done.
func PutBack(ask string) string {
	return "Everything you changed for this task earlier in this conversation was undone: the task did not complete, " +
		"your changes were kept aside, and the files are back as they were before the task began. " +
		"Do not assume any of that work is present; look at the files as they are now.\n\n" + ask
}

// DefaultNormalizeTemplate converts a free-form document into the plan format;
// {{DOC}} stands for the document.
const DefaultNormalizeTemplate = "Rewrite the document between the fence lines as a task plan. " +
	"Each task starts with a heading line of the form `## Task N` (N = 1, 2, 3, ...), " +
	"optionally followed by ` (parallel)` when it may run at the same time as its neighbours, " +
	"and its description follows under the heading. Print only the plan.\n\n" +
	fenceDoc + "\n{{DOC}}\n" + fenceDoc

// Normalize fills the template ("" for the built-in one) with the document.
func Normalize(template, doc string) string {
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

// Fixes are what one address call asks the agent to fix: the findings of
// a review (when Findings is set; Review is the review's output, which may
// be empty) and the project's own checks that fail.
type Fixes struct {
	Findings    bool
	Review      string
	Suggestions []string
	Checks      []CheckFailure
}

// CheckFailure is a failing check as the address prompt shows it.
type CheckFailure struct {
	Command string
	// Result says how it ended: "exited with status 1", "timed out after 600 s".
	Result string
	// Output is the tail of its combined output, already bounded and with
	// its control characters escaped, without a final newline; when Cut,
	// the output was longer and Output holds its last lines.
	Output string
	Cut    bool
}

const fenceCheck = "---CHECK---"

// Address asks the agent to fix the findings of a review, with the
// reviewer's suggestions (one per line) in their own fenced block when there
// are any, and the failing checks, each in a fenced block of its own with
// its command, how it ended and the tail of its output.
func Address(f Fixes) string {
	var parts []string
	if f.Findings {
		p := "Fix the findings of the code review between the fence lines, then run the tests.\n\n" + fenced(fenceStet, f.Review)
		if len(f.Suggestions) > 0 {
			p += "\n\nThe reviewer suggested these changes, one per line:\n\n" + fenced(fenceSuggestions, strings.Join(f.Suggestions, "\n"))
		}
		parts = append(parts, p)
	}
	if len(f.Checks) > 0 {
		p := "These checks of the project fail on the work. Make each one pass by fixing the work " +
			"(change a test or a check only where it is wrong, never to hide a failure), then run them again. " +
			"Each block below is one check: its command, how it ended, and the end of its output."
		for _, c := range f.Checks {
			body := "command: " + c.Command + "\nresult: " + c.Result + "\n"
			switch {
			case c.Output == "":
				body += "output: none"
			case c.Cut:
				body += fmt.Sprintf("output (its last %d lines):\n", strings.Count(c.Output, "\n")+1) + unfence(c.Output, fenceCheck)
			default:
				body += "output:\n" + unfence(c.Output, fenceCheck)
			}
			p += "\n\n" + fenced(fenceCheck, body)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "\n\n")
}

// unfence keeps a payload from closing its block early: a line that is the
// fence itself is indented by a space.
func unfence(payload, fence string) string {
	if !strings.Contains(payload, fence) {
		return payload
	}
	lines := strings.Split(payload, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) == fence {
			lines[i] = " " + l
		}
	}
	return strings.Join(lines, "\n")
}

// Triage asks whether a review has anything worth addressing.
func Triage(review string) string {
	return "Read the code review between the fence lines and say which findings, by id, really need a fix; " +
		"say \"nothing to address\" if none do.\n\n" + fenced(fenceStet, review) + "\n\n" + TriageQuestion
}
