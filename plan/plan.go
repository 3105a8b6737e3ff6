// Package plan owns the plan format: the `## Task N` sections of a
// markdown plan, read into tasks (Read, Parse), what a task is known by
// from one run to the next (Task.Key), the tasks a run selects (--task,
// --from-task), the parallel blocks they form, and the prompt that teaches
// an LLM to write a plan (`peal prompt`).
package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"peal/internal/safefs"
	"peal/internal/text"
)

// Task is one `## Task N` section of a plan.
type Task struct {
	Index    int
	Parallel bool
	Body     string
}

// Key is what a task is known by from one run to the next: a digest of its
// text with every run of white space made one space, so that re-wrapping a
// paragraph or indenting it changes nothing, while any change of its words
// does. Its number and its (parallel) mark are not part of it: a task moved
// to another number, or into a block, is the same task.
func (t Task) Key() string { return TextKey(t.Body) }

// TextKey is the key of a text (see Task.Key).
func TextKey(text string) string {
	sum := sha256.Sum256([]byte(strings.Join(strings.Fields(text), " ")))
	return hex.EncodeToString(sum[:12])
}

// Segment is a run of tasks scheduled together: one sequential task, or a
// block of consecutive (parallel) tasks.
type Segment struct {
	Parallel bool
	Tasks    []Task
}

var (
	// taskHeading is a task heading: up to three spaces, "## Task N", then
	// optionally "(parallel)" and a title, in either order ("## Task 2:
	// Add API", "## Task 3 (parallel) - Docs", "## Task 4 - Docs (parallel)").
	taskHeading = regexp.MustCompile(`^ {0,3}##[ \t]+Task[ \t]+(\d+)(?:[ \t]*(\([Pp]arallel\)))?(?:(?:[ \t]*[:\-–—][ \t]*|[ \t]+)(.*?))?[ \t]*$`)
	// parallelSuffix is "(parallel)" at the end of a title.
	parallelSuffix = regexp.MustCompile(`[ \t]*\([Pp]arallel\)$`)
	// nearHeading is a line that starts like a task heading: a level-2
	// heading whose text begins with the word "task", or a level-1 heading
	// "task" and a number.
	nearHeading = regexp.MustCompile(`(?i)^ {0,3}(?:##[ \t]*task(?:[ \t#:]|\d|$)|#[ \t]*task[ \t]*#?[ \t]*\d)`)
	// fence opens or closes a fenced code block: three or more backticks or
	// tildes; headings inside one are text.
	fence = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})")
)

// Normalized are the tasks of an agent's answer to the normalize prompt
// (prompt.Normalize): an answer that Parse refuses, or that has no task,
// is an error, which quotes how an answer without a task starts.
func Normalized(answer string) ([]Task, error) {
	tasks, err := Parse(answer)
	if err != nil {
		return nil, fmt.Errorf("normalized plan: %w", err)
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("normalized plan has no `## Task N` heading; it starts %q", text.Snippet(answer, 80))
	}
	return tasks, nil
}

// Parse reads the tasks of a plan in ascending index order. Text before
// the first heading is ignored; a task's body is its heading's title, if
// any, and every line to the next heading, trimmed. No heading at all gives
// no tasks and no error. A line that looks like a task heading but is not
// one, text that is not UTF-8 and NUL bytes are errors naming the line.
func Parse(text string) ([]Task, error) {
	if err := checkText(text); err != nil {
		return nil, err
	}
	text = strings.TrimPrefix(text, "\uFEFF") // a byte-order mark is not part of the first line
	var tasks []Task
	var body []string
	var cur *Task
	flush := func() {
		if cur != nil {
			cur.Body = strings.TrimSpace(strings.Join(body, "\n"))
			tasks = append(tasks, *cur)
		}
	}
	openFence := ""
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r") // CRLF line ends (and stray CRs before them) read as LF
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case openFence == "":
				openFence = m[1]
			case m[1][0] == openFence[0] && len(m[1]) >= len(openFence) && strings.TrimSpace(line[len(m[0]):]) == "":
				openFence = ""
			}
		}
		var m []string
		if openFence == "" {
			m = taskHeading.FindStringSubmatch(line)
		}
		if m == nil {
			if openFence == "" && nearHeading.MatchString(line) {
				return nil, fmt.Errorf("line %d, %s, looks like a task heading but is not one: write `## Task N`, optionally followed by ` (parallel)` and a title", n+1, quoteLine(line))
			}
			if cur != nil {
				body = append(body, line)
			}
			continue
		}
		flush()
		idx, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, fmt.Errorf("line %d, %s: the task number is too large", n+1, quoteLine(line))
		}
		title := m[3]
		parallel := m[2] != ""
		if loc := parallelSuffix.FindStringIndex(title); loc != nil {
			parallel, title = true, title[:loc[0]]
		}
		cur, body = &Task{Index: idx, Parallel: parallel}, nil
		if title = strings.TrimSpace(title); title != "" {
			body = append(body, title)
		}
	}
	flush()
	slices.SortStableFunc(tasks, func(a, b Task) int { return a.Index - b.Index })
	for i := 1; i < len(tasks); i++ {
		if tasks[i].Index == tasks[i-1].Index {
			return nil, fmt.Errorf("task %d appears more than once: give each task its own number", tasks[i].Index)
		}
	}
	return tasks, nil
}

// checkText refuses a plan that cannot be handed to an agent as text: bytes
// that are not UTF-8, or a NUL byte.
func checkText(text string) error {
	if i := strings.IndexByte(text, 0); i >= 0 {
		return fmt.Errorf("line %d holds a NUL byte: a plan must be text", lineOf(text, i))
	}
	if !utf8.ValidString(text) {
		i := 0
		for i < len(text) {
			r, size := utf8.DecodeRuneInString(text[i:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			i += size
		}
		return fmt.Errorf("line %d is not valid UTF-8: save the plan as UTF-8", lineOf(text, i))
	}
	return nil
}

// lineOf is the 1-based line of byte offset i.
func lineOf(text string, i int) int {
	return 1 + bytes.Count([]byte(text[:i]), []byte{'\n'})
}

// quoteLine shows a line of input in a message: control characters (escape
// sequences included) dropped, cut to 80 characters, quoted.
func quoteLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || (unicode.IsControl(r) && r != '\t') {
			return -1
		}
		return r
	}, s)
	if rs := []rune(s); len(rs) > 80 {
		s = string(rs[:80]) + "…"
	}
	return strconv.Quote(s)
}

// Select applies --task (only that task) or --from-task (that task and
// every later one). An index not in the plan is an error.
func Select(tasks []Task, only, from *uint32) ([]Task, error) {
	pick := only
	if pick == nil {
		pick = from
	}
	if pick == nil {
		return tasks, nil
	}
	pos := slices.IndexFunc(tasks, func(t Task) bool { return t.Index == int(*pick) })
	if pos < 0 {
		flag := "--task"
		if only == nil {
			flag = "--from-task"
		}
		return nil, fmt.Errorf("%s %d: the plan has no task %d (tasks: %s)", flag, *pick, *pick, IndexList(tasks))
	}
	if only != nil {
		return tasks[pos : pos+1], nil
	}
	return tasks[pos:], nil
}

// Segments groups tasks into the schedule: consecutive parallel tasks form a
// block; a block of one is sequential.
func Segments(tasks []Task) []Segment {
	var segs []Segment
	for i := 0; i < len(tasks); {
		j := i + 1
		if tasks[i].Parallel {
			for j < len(tasks) && tasks[j].Parallel {
				j++
			}
		}
		segs = append(segs, Segment{Parallel: j-i > 1, Tasks: tasks[i:j]})
		i = j
	}
	return segs
}

func IndexList(tasks []Task) string {
	parts := make([]string, len(tasks))
	for i, t := range tasks {
		parts[i] = strconv.Itoa(t.Index)
	}
	return strings.Join(parts, ", ")
}

// MaxBytes bounds what peal reads of a plan or a prompt template: far beyond
// any real plan, and never a surprise of memory.
const MaxBytes = 16 << 20

// Read reads and parses the plan file at path. No task and no error means
// the plan needs normalizing (normalize: normalize_plan is on); its text is
// returned for it. A file without a task heading is an error otherwise, and
// an empty one always.
func Read(path string, normalize bool) ([]Task, string, error) {
	data, err := safefs.ReadFile(path, MaxBytes)
	if err != nil {
		return nil, "", fmt.Errorf("plan %s: %w", path, safefs.Reason(err))
	}
	text := string(data)
	if strings.TrimSpace(text) == "" {
		return nil, "", fmt.Errorf("plan %s is empty: add tasks as `## Task N` sections (see `peal prompt`)", path)
	}
	tasks, err := Parse(text)
	if err != nil {
		return nil, "", fmt.Errorf("plan %s: %w", path, err)
	}
	if len(tasks) == 0 && !normalize {
		return nil, "", fmt.Errorf("plan %s has no `## Task N` heading: add task headings (see `peal prompt`) or enable normalize_plan (--normalize)", path)
	}
	return tasks, text, nil
}
