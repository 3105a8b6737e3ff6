package plan

import (
	"strings"
	"testing"
)

func TestParsePlan(t *testing.T) {
	t.Parallel()
	type want struct {
		index    int
		parallel bool
		body     string
	}
	cases := []struct {
		name string
		text string
		want []want
	}{
		{"basic", "## Task 1\nDo A\n\n## Task 2\nDo B\n", []want{{1, false, "Do A"}, {2, false, "Do B"}}},
		{"crlf", "## Task 1\r\nline one\r\nline two\r\n## Task 2\r\nB\r\n", []want{{1, false, "line one\nline two"}, {2, false, "B"}}},
		{"preamble ignored", "# Title\nintro text\n## Not a task\n## Task 3\nbody\n", []want{{3, false, "body"}}},
		{"sub-headings stay in the body", "## Task 1\n### Context\nctx\n#### Steps\n- a\n", []want{{1, false, "### Context\nctx\n#### Steps\n- a"}}},
		{"out of order", "## Task 3\nC\n## Task 1\nA\n## Task 2\nB\n", []want{{1, false, "A"}, {2, false, "B"}, {3, false, "C"}}},
		{"parallel marker", "## Task 1 (parallel)\nA\n## Task   2   (parallel)  \nB\n## Task 3\nC\n", []want{{1, true, "A"}, {2, true, "B"}, {3, false, "C"}}},
		// Peal read "## Task 2 extra" as text of task 1; a title after the
		// number is accepted here and stays in the task's text.
		{"titled headings", "## Task 1: Add API\nA\n## Task 2 - Docs\nB\n## Task 3 — Tests (parallel)\nC\n## Task 4 (parallel): Lint\nD\n## Task 5 extra\nE\n",
			[]want{{1, false, "Add API\nA"}, {2, false, "Docs\nB"}, {3, true, "Tests\nC"}, {4, true, "Lint\nD"}, {5, false, "extra\nE"}}},
		{"indented up to three spaces", "   ## Task 1\nA\n    ## Task 2\nstill A\n", []want{{1, false, "A\n    ## Task 2\nstill A"}}},
		{"headings in fenced code are text", "## Task 1\n```md\n## Task 9\n```\n~~~~\n## Task 8\n~~~\n## Task 7\n~~~~\n## Task 2\nB\n",
			[]want{{1, false, "```md\n## Task 9\n```\n~~~~\n## Task 8\n~~~\n## Task 7\n~~~~"}, {2, false, "B"}}},
		{"byte-order mark", "\uFEFF## Task 1\nA\n", []want{{1, false, "A"}}},
		{"task 0", "## Task 0\nzero\n## Task 1\none\n", []want{{0, false, "zero"}, {1, false, "one"}}},
		{"other headings", "# Task plan\n## Tasks\n### Task 4\n## Task 1\nA\n### Task 5\n", []want{{1, false, "A\n### Task 5"}}},
		{"tabs in heading", "## Task\t7\t(parallel)\nX\n", []want{{7, true, "X"}}},
		{"empty body", "## Task 1\n## Task 2\nB", []want{{1, false, ""}, {2, false, "B"}}},
		{"no tasks", "# Plan\nJust prose.\n", nil},
		{"other level-2 headings stay in the body", "## Task 1\nBody.\n\n## Not a task heading\nStill task 1.\n",
			[]want{{1, false, "Body.\n\n## Not a task heading\nStill task 1."}}},
		{"body to the end of a file without a final newline", "## Task 1\nOnly task.\nMultiple lines.\nNo trailing heading.",
			[]want{{1, false, "Only task.\nMultiple lines.\nNo trailing heading."}}},
		{"heading at the end of the file", "## Task 999", []want{{999, false, ""}}},
		{"gaps in indices", "## Task 5\nFifth.\n\n## Task 1\nFirst.\n\n## Task 3\nThird.\n", []want{{1, false, "First."}, {3, false, "Third."}, {5, false, "Fifth."}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d tasks %+v, want %d", len(got), got, len(tc.want))
			}
			for i, w := range tc.want {
				if got[i].Index != w.index || got[i].Parallel != w.parallel || got[i].Body != w.body {
					t.Errorf("task %d = %+v, want %+v", i, got[i], w)
				}
			}
		})
	}
}

// A line that starts like a task heading but is not one is an error naming
// the line, bounded and free of control characters, and so is text that
// cannot be a prompt.
func TestParsePlanRejects(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, text, want string }{
		{"lower case", "## Task 1\nA\n## task 2\nB\n", `line 3, "## task 2", looks like a task heading`},
		{"no space", "##Task 2\nB\n", `line 1, "##Task 2", looks like a task heading`},
		{"word for a number", "## Task two\n", `line 1, "## Task two", looks like a task heading`},
		{"decimal", "## Task 1.5\n", `line 1, "## Task 1.5", looks like a task heading`},
		{"level one", "# Task 3\n", `line 1, "# Task 3", looks like a task heading`},
		{"escape sequences", "## Task x\x1b]0;title\x07\x1b[2J\n", `line 1, "## Task x]0;title[2J", looks like a task heading`},
		{"huge number", "## Task 99999999999999999999999\n", `line 1, "## Task 99999999999999999999999": the task number is too large`},
		{"NUL", "## Task 1\nA\x00B\n", "line 2 holds a NUL byte"},
		{"not UTF-8", "## Task 1\nok\n\xff\xfe\n", "line 3 is not valid UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.text)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	long := "## Task " + strings.Repeat("x", 1<<20) + "\n"
	if _, err := Parse(long); err == nil || len(err.Error()) > 300 {
		t.Fatalf("a 1 MB heading gives an error of %d bytes", len(err.Error()))
	}
}

func TestParsePlanDuplicate(t *testing.T) {
	t.Parallel()
	_, err := Parse("## Task 1\nA\n## Task 1\nB\n")
	if err == nil || !strings.Contains(err.Error(), "task 1 appears more than once") {
		t.Fatalf("err = %v", err)
	}
}

func TestSegments(t *testing.T) {
	t.Parallel()
	tasks, _ := Parse("## Task 1\n## Task 2 (parallel)\n## Task 3 (parallel)\n## Task 4\n## Task 5 (parallel)\n## Task 6\n")
	segs := Segments(tasks)
	var got []string
	for _, s := range segs {
		var idx []string
		for _, t := range s.Tasks {
			idx = append(idx, string(rune('0'+t.Index)))
		}
		kind := "seq"
		if s.Parallel {
			kind = "par"
		}
		got = append(got, kind+":"+strings.Join(idx, ","))
	}
	// A parallel block of one task runs sequentially.
	want := "seq:1 par:2,3 seq:4 seq:5 seq:6"
	if strings.Join(got, " ") != want {
		t.Fatalf("segments %q, want %q", strings.Join(got, " "), want)
	}
}

func TestSelectTasks(t *testing.T) {
	t.Parallel()
	tasks, _ := Parse("## Task 1\n## Task 2\n## Task 4\n")
	u := func(n uint32) *uint32 { return &n }
	indices := func(ts []Task) string {
		var s []string
		for _, t := range ts {
			s = append(s, string(rune('0'+t.Index)))
		}
		return strings.Join(s, ",")
	}
	if got, _ := Select(tasks, u(2), nil); indices(got) != "2" {
		t.Errorf("--task 2 = %s", indices(got))
	}
	if got, _ := Select(tasks, nil, u(2)); indices(got) != "2,4" {
		t.Errorf("--from-task 2 = %s", indices(got))
	}
	if got, _ := Select(tasks, nil, nil); indices(got) != "1,2,4" {
		t.Errorf("no selection = %s", indices(got))
	}
	if _, err := Select(tasks, u(3), nil); err == nil || !strings.Contains(err.Error(), "--task 3") || !strings.Contains(err.Error(), "1, 2, 4") {
		t.Errorf("--task 3: %v", err)
	}
	if _, err := Select(tasks, nil, u(9)); err == nil || !strings.Contains(err.Error(), "--from-task 9") {
		t.Errorf("--from-task 9: %v", err)
	}
	// --from-task in the middle of a parallel block leaves a block of one,
	// which runs sequentially.
	block, _ := Parse("## Task 1\nA\n## Task 2 (parallel)\nB\n## Task 3 (parallel)\nC\n## Task 4\nD\n")
	from3, _ := Select(block, nil, u(3))
	if segs := Segments(from3); len(segs) != 2 || segs[0].Parallel || segs[1].Parallel || segs[0].Tasks[0].Index != 3 {
		t.Errorf("--from-task 3 segments %+v", segs)
	}
	if segs := Segments(block); len(segs) != 3 || !segs[1].Parallel || len(segs[1].Tasks) != 2 {
		t.Errorf("whole plan segments %+v", segs)
	}
}

func FuzzParsePlan(f *testing.F) {
	f.Add("## Task 1\nA\n## Task 2 (parallel)\nB\n")
	f.Add("preamble\r\n## Task 10\r\nx\r\n")
	f.Add("## Task 1\n## Task 1\n")
	f.Add("## Task 99999999999999999999999\n")
	f.Add("## Task 2: Title (parallel)\n```\n## Task 3\n```\n")
	f.Fuzz(func(t *testing.T, text string) {
		tasks, err := Parse(text)
		if err != nil {
			return
		}
		for i, task := range tasks {
			if i > 0 && tasks[i-1].Index >= task.Index {
				t.Fatalf("tasks not in strictly ascending order: %+v", tasks)
			}
			if task.Body != strings.TrimSpace(task.Body) {
				t.Fatalf("body not trimmed: %q", task.Body)
			}
			if strings.Contains(task.Body, "\r\n") {
				t.Fatalf("CRLF left in body: %q", task.Body)
			}
		}
		n := 0
		for _, s := range Segments(tasks) {
			n += len(s.Tasks)
			if s.Parallel && len(s.Tasks) < 2 {
				t.Fatalf("parallel segment of %d task", len(s.Tasks))
			}
		}
		if n != len(tasks) {
			t.Fatalf("segments hold %d tasks, plan has %d", n, len(tasks))
		}
	})
}

// TestPromptWithWhatToBuild: the description of what to build goes in the
// prompt between fence lines, before the last line; without one the prompt
// is the format alone.
func TestPromptWithWhatToBuild(t *testing.T) {
	t.Parallel()
	if Prompt("  \n") != FormatPrompt || !strings.HasSuffix(FormatPrompt, "Reply with the plan only, in this format.\n") {
		t.Fatalf("the prompt without a description:\n%s", Prompt(""))
	}
	p := Prompt("\nA CLI that counts words.\n")
	want := "What to build\n\nThe plan is for what is described between the two lines ---WHAT TO BUILD--- below.\n\n" +
		"---WHAT TO BUILD---\nA CLI that counts words.\n---WHAT TO BUILD---\n\nReply with the plan only, in this format.\n"
	if !strings.HasPrefix(p, strings.TrimSuffix(FormatPrompt, "Reply with the plan only, in this format.\n")) || !strings.HasSuffix(p, want) {
		t.Fatalf("prompt:\n%s", p)
	}
}

// TestNormalized: an answer to the normalize prompt gives its tasks; one
// without a task, or that is no plan, is an error that says so.
func TestNormalized(t *testing.T) {
	t.Parallel()
	if tasks, err := Normalized("intro\n## Task 1\ndo it\n"); err != nil || len(tasks) != 1 || tasks[0].Body != "do it" {
		t.Fatalf("%+v, %v", tasks, err)
	}
	for answer, want := range map[string]string{
		"Sure! Here is the plan:\n- do it": `normalized plan has no ` + "`## Task N`" + ` heading; it starts "Sure! Here is the plan: - do it"`,
		"## Task 1\nx\x00":                 "normalized plan: ",
	} {
		if _, err := Normalized(answer); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: %v, want %q…", answer, err, want)
		}
	}
}
