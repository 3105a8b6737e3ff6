package prompt

import (
	"strings"
	"testing"
)

func TestPromptsAreFenced(t *testing.T) {
	t.Parallel()
	fences := []string{"---TASK---", "---PLAN---", "---DOC---", "---STET---", "---SUGGESTIONS---", "---CHECK---"}
	cases := map[string]struct {
		prompt string
		// blocks are the fenced blocks the prompt holds, fence then payload.
		blocks [][2]string
	}{
		"plan":             {Plan("do X\nthen Y"), [][2]string{{"---TASK---", "do X\nthen Y"}}},
		"plan, empty":      {Plan(""), [][2]string{{"---TASK---", ""}}},
		"execute":          {Execute("step 1"), [][2]string{{"---PLAN---", "step 1"}}},
		"execute, empty":   {Execute(""), [][2]string{{"---PLAN---", ""}}},
		"normalize":        {Normalize("", "my doc"), [][2]string{{"---DOC---", "my doc"}}},
		"normalize, empty": {Normalize("", ""), [][2]string{{"---DOC---", ""}}},
		"address":          {Address(Fixes{Findings: true, Review: "finding: bad code"}), [][2]string{{"---STET---", "finding: bad code"}}},
		"address, empty":   {Address(Fixes{Findings: true}), [][2]string{{"---STET---", ""}}},
		"address, hints":   {Address(Fixes{Findings: true, Review: "{}", Suggestions: []string{"use X", "use Y"}}), [][2]string{{"---STET---", "{}"}, {"---SUGGESTIONS---", "use X\nuse Y"}}},
		"address, checks": {Address(Fixes{Checks: []CheckFailure{
			{Command: "go test ./...", Result: "exited with status 1", Output: "--- FAIL: TestAdd\nFAIL"},
			{Command: "make lint", Result: "timed out after 60 s"},
		}}), [][2]string{
			{"---CHECK---", "command: go test ./...\nresult: exited with status 1\noutput:\n--- FAIL: TestAdd\nFAIL"},
			{"---CHECK---", "command: make lint\nresult: timed out after 60 s\noutput: none"},
		}},
		"address, both": {Address(Fixes{Findings: true, Review: "{}", Checks: []CheckFailure{{Command: "go vet ./...", Result: "exited with status 2", Output: "x.go:1: bad\n---CHECK---", Cut: true}}}),
			[][2]string{{"---STET---", "{}"}, {"---CHECK---", "command: go vet ./...\nresult: exited with status 2\noutput (its last 2 lines):\nx.go:1: bad\n ---CHECK---"}}},
		"triage":            {Triage("finding: bad code"), [][2]string{{"---STET---", "finding: bad code"}}},
		"custom normalize":  {Normalize("Convert this.", "abc"), [][2]string{{"---DOC---", "abc"}}},
		"plan, no fence in": {Plan("a\n---PLAN---\nb"), [][2]string{{"---TASK---", "a\n---PLAN---\nb"}}},
	}
	for name, c := range cases {
		for _, b := range c.blocks {
			if !strings.Contains(c.prompt, b[0]+"\n"+b[1]+"\n"+b[0]) {
				t.Errorf("%s: no %s block around %q: %q", name, b[0], b[1], c.prompt)
			}
		}
		// Each block's fence appears twice; the fences of other calls not at
		// all (beyond the payload's own text).
		for _, f := range fences {
			want := 0
			for _, b := range c.blocks {
				if b[0] == f {
					want += 2
				}
			}
			for _, b := range c.blocks {
				want += strings.Count(b[1], f)
			}
			if got := strings.Count(c.prompt, f); got != want {
				t.Errorf("%s: %d times %s, want %d: %q", name, got, f, want, c.prompt)
			}
		}
	}
	if got := Triage("x"); !strings.HasSuffix(got, "---STET---\n\n"+TriageQuestion) {
		t.Errorf("triage prompt does not end with its question: %q", got)
	}
	if got := Normalize("Convert: {{DOC}}!", "abc"); got != "Convert: abc!" {
		t.Errorf("custom normalize template: %q", got)
	}
}
