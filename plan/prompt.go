package plan

import "strings"

// FormatPrompt is what `peal prompt` prints: instructions that let an LLM
// write a plan peal can run, for a person to follow with what they want
// built.
const FormatPrompt = formatRules + replyLine

// Prompt is the prompt with want, the description of what the person wants
// built, between two fence lines of its own (it is data, not more of the
// format's rules); without one it is FormatPrompt.
func Prompt(want string) string {
	want = strings.TrimSpace(want)
	if want == "" {
		return FormatPrompt
	}
	return formatRules + "What to build\n\nThe plan is for what is described between the two lines " + wantFence +
		" below.\n\n" + wantFence + "\n" + want + "\n" + wantFence + "\n\n" + replyLine
}

// wantFence encloses the description of what to build.
const wantFence = "---WHAT TO BUILD---"

// replyLine ends the prompt.
const replyLine = "Reply with the plan only, in this format.\n"

const formatRules = `You are writing a work plan that an automated tool, peal, will carry out task
by task with a coding agent. peal reads only the structure described here.

Format

- Each task begins with a heading line that reads exactly "## Task N", where N is
  a whole number. Number tasks 1, 2, 3 and so on; they run in ascending order of
  N, whatever order they appear in.
- To let a task run at the same time as the tasks next to it, end its heading
  with " (parallel)", as in "## Task 4 (parallel)". Neighbouring parallel tasks
  form one block; they must not depend on each other or touch the same files.
- Everything under a heading, up to the next "## Task" heading, is that task's
  description. Sub-headings ("###"), lists and code blocks are fine inside it.
- Anything before the first task heading (a title, an introduction) is ignored.

Writing good tasks

- Make each task one reviewable change: a feature, a fix, a refactoring step.
- Say what is done when the task is done: the behaviour, the tests that prove
  it, the files or modules involved.
- Put the tasks in the order they can be built: later tasks may rely on earlier
  ones, never the other way round.
- Do not ask the agent to commit, push or open pull requests; peal handles the
  workflow around each task.

Example

# Add rate limiting to the API

## Task 1
Add a token-bucket limiter in internal/ratelimit with unit tests for refill and
burst behaviour.

## Task 2 (parallel)
Apply the limiter to the public HTTP handlers; return 429 with a Retry-After
header when a client is over its limit. Add handler tests.

## Task 3 (parallel)
Document the limits and their configuration in docs/api.md.

## Task 4
Add a metric counting rejected requests and a test that checks it increments.

`
