package runner

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Task is one `## Task N` section of a plan.
type Task struct {
	Index    int
	Parallel bool
	Body     string
}

// Segment is a run of tasks scheduled together: one sequential task, or a
// block of consecutive (parallel) tasks.
type Segment struct {
	Parallel bool
	Tasks    []Task
}

var taskHeading = regexp.MustCompile(`^## Task\s+(\d+)\s*(\(parallel\))?\s*$`)

// ParsePlan reads the tasks of a plan in ascending index order. Text before
// the first heading is ignored; a task's body runs to the next heading and is
// trimmed. No heading at all gives no tasks and no error.
func ParsePlan(text string) ([]Task, error) {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	var tasks []Task
	var body []string
	var cur *Task
	flush := func() {
		if cur != nil {
			cur.Body = strings.TrimSpace(strings.Join(body, "\n"))
			tasks = append(tasks, *cur)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		m := taskHeading.FindStringSubmatch(line)
		if m == nil {
			if cur != nil {
				body = append(body, line)
			}
			continue
		}
		flush()
		idx, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, fmt.Errorf("task heading %q: index too large", strings.TrimSpace(line))
		}
		cur, body = &Task{Index: idx, Parallel: m[2] != ""}, nil
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

// SelectTasks applies --task (only that task) or --from-task (that task and
// every later one). An index not in the plan is an error.
func SelectTasks(tasks []Task, only, from *uint32) ([]Task, error) {
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
		return nil, fmt.Errorf("%s %d: the plan has no task %d (tasks: %s)", flag, *pick, *pick, indexList(tasks))
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

func indexList(tasks []Task) string {
	parts := make([]string, len(tasks))
	for i, t := range tasks {
		parts[i] = strconv.Itoa(t.Index)
	}
	return strings.Join(parts, ", ")
}
