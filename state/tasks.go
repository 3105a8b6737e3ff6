package state

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"peal/internal/jsonobj"
	"peal/internal/safefs"
	planfmt "peal/plan"
)

// A task is known by its text, not by its number: state.json keeps, with
// a plan's progress, the tasks of the plan as its last run read them
// (member "tasks": each task's number then, the key of its text, its state
// and its ticket). A run, `peal status` and the dry run tie that list to
// the plan as it is now (State.Align): a task whose text is in the list
// keeps its state and its ticket wherever it moved; a task whose text is
// not is pending, whether it is new or its text changed; a task of the list
// that is no longer in the plan is forgotten. completed_task_indices and
// deferred_task_indices are still written, in the numbers of the plan as
// it is now, so that Peal reads the file as it always did. A state written
// without "tasks" (by Peal, or by a peal before this) is taken as its
// numbers say, once, and its texts are recorded from then on.

// TaskText is a task of the plan as it is now: its number, and the key of
// its text (plan.Task.Key).
type TaskText struct {
	Index int
	Key   string
}

// Texts are tasks as Align takes them. doc is the document a plan without
// task headings was normalized from ("" for a plan with headings): the
// words of a normalized task are the agent's, new at every run, so its
// tasks are known by their number in that document, and all of them are
// new once the document changed.
func Texts(tasks []planfmt.Task, doc string) []TaskText {
	out := make([]TaskText, len(tasks))
	for i, t := range tasks {
		key := t.Key()
		if doc != "" {
			key = planfmt.TextKey(fmt.Sprintf("task %d of %s", t.Index, doc))
		}
		out[i] = TaskText{Index: t.Index, Key: key}
	}
	return out
}

// TaskEntry is one task of the member "tasks" of a plan's progress.
type TaskEntry struct {
	Task int `json:"task"`
	// Text is the key of the task's text (plan.Task.Key).
	Text string `json:"text"`
	// State is "completed" or "deferred"; "" is pending.
	State string `json:"state,omitempty"`
	// Ticket is the task's part of its ticket id, after the plan's
	// prefix and a dash: the number the task had when it was first seen,
	// with a letter after it when another task held that number's ticket
	// then ("3", "3b"). "" is the task's number.
	Ticket string `json:"ticket,omitempty"`
}

// maxEarlier caps the tasks kept of texts the plan no longer holds.
const maxEarlier = 200

// The states of a TaskEntry.
const (
	taskCompleted = "completed"
	taskDeferred  = "deferred"
)

// Move is a task whose number changed: the same text under another number.
type Move struct{ From, To int }

// Changes is what changed in a plan since its last run, in the numbers of
// the plan as it is now (Removed: the numbers they had).
type Changes struct {
	// Known: the state held the texts of the plan's tasks. Without them
	// (a plan never run, or a state written by Peal or an earlier peal)
	// nothing can be told; Numbered then says that progress was taken by
	// its numbers.
	Known    bool
	Numbered bool
	Changed  []int // the text of the task of that number changed
	Inserted []int // new tasks
	Moved    []Move
	Removed  []int
	// Again are the tasks of Changed that were completed or deferred:
	// they run again. Back are tasks whose text is one the plan had before
	// its last run (an edit undone): they take back the state they had.
	Again, Back []int
	// Warning says why the texts kept in the state were not used.
	Warning string
	// MovedFrom is the path the plan had when its progress was kept: the
	// plan file moved (same repository, mostly the same tasks).
	MovedFrom string
	// now maps the number a task had at the last run to its number now;
	// a task that is no longer in the plan has none.
	now map[int]int
}

// Now is the number a task of the last run has now; false when its text is
// no longer in the plan (changed or removed).
func (c Changes) Now(was int) (int, bool) {
	if !c.Known {
		return was, true
	}
	n, ok := c.now[was]
	return n, ok
}

// None reports whether the plan's tasks are what its last run read.
func (c Changes) None() bool {
	return len(c.Changed)+len(c.Inserted)+len(c.Moved)+len(c.Removed) == 0
}

// Line says in one line what changed since the plan's last run; "" for a
// plan with no earlier run.
func (c Changes) Line() string {
	line := c.line()
	if c.MovedFrom != "" {
		moved := "the plan was at " + c.MovedFrom + " when its progress was kept: it goes on from there"
		if line == "" {
			return moved
		}
		return moved + "; " + line
	}
	return line
}

func (c Changes) line() string {
	switch {
	case c.Warning != "":
		return c.Warning
	case !c.Known && c.Numbered:
		return "the state holds no texts of the tasks (written by Peal or an earlier peal): its task numbers are taken as they are, and the tasks' texts are recorded from now on"
	case !c.Known:
		return ""
	case c.None():
		return "the plan's tasks are as its last run read them"
	}
	var parts []string
	if len(c.Changed) > 0 {
		p := fmt.Sprintf("%s changed", tasksWord(c.Changed))
		if len(c.Again) > 0 {
			who := tasksWord(c.Again) + " was"
			switch {
			case slices.Equal(c.Again, c.Changed) && len(c.Again) == 1:
				who = "it was"
			case slices.Equal(c.Again, c.Changed):
				who = "they were"
			case len(c.Again) > 1:
				who = tasksWord(c.Again) + " were"
			}
			p += fmt.Sprintf(" (%s done for the old text: %s again)", who, runsWord(len(c.Again)))
		}
		parts = append(parts, p)
	}
	if len(c.Inserted) > 0 {
		parts = append(parts, fmt.Sprintf("%s new", tasksWord(c.Inserted)))
	}
	if len(c.Back) > 0 {
		parts = append(parts, fmt.Sprintf("%s back to an earlier text (the state it had goes with it)", tasksWord(c.Back)))
	}
	if len(c.Moved) > 0 {
		moves := make([]string, len(c.Moved))
		for i, m := range c.Moved {
			moves[i] = fmt.Sprintf("%d→%d", m.From, m.To)
		}
		parts = append(parts, fmt.Sprintf("renumbered %s (each keeps its state and ticket)", bounded(moves)))
	}
	if len(c.Removed) > 0 {
		parts = append(parts, fmt.Sprintf("%s of the last run removed", tasksWord(c.Removed)))
	}
	return "the plan changed since its last run: " + strings.Join(parts, "; ")
}

func runsWord(n int) string {
	if n == 1 {
		return "it runs"
	}
	return "they run"
}

// tasksWord is "task 3" or "tasks 3, 4", bounded.
func tasksWord(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	if len(xs) == 1 {
		return "task " + s[0]
	}
	return "tasks " + bounded(s)
}

// bounded joins at most 10 items, and says how many more there are.
func bounded(items []string) string {
	const most = 10
	if len(items) <= most {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:most], ", ") + fmt.Sprintf(" and %d more", len(items)-most)
}

// Align ties st, a plan's progress as its last run left it, to the plan's
// tasks as they are now (every task of the plan, in any order): the state it
// gives holds the progress in the numbers of now, and the changes say how
// the plan moved. It changes nothing on disk.
func (st State) Align(now []TaskText) (State, Changes) {
	out := State{PlanPath: st.PlanPath, RepoPath: st.RepoPath, Tasks: make([]TaskEntry, len(now))}
	var ch Changes
	if st.Tasks == nil {
		if st.tasksProblem != "" {
			ch.Warning = "the tasks kept in the state cannot be used (" + st.tasksProblem + "): its task numbers are taken as they are"
		}
		done, deferred := st.CompletedTaskIndices, st.DeferredTaskIndices
		ch.Numbered = ch.Warning == "" && len(done)+len(deferred) > 0
		for i, t := range now {
			e := TaskEntry{Task: t.Index, Text: t.Key}
			switch {
			case slices.Contains(done, t.Index):
				e.State = taskCompleted
			case slices.Contains(deferred, t.Index):
				e.State = taskDeferred
			}
			out.Tasks[i] = e
		}
		out.indices()
		return out, ch
	}
	ch.Known, ch.now = true, map[int]int{}
	old := st.Tasks
	used := make([]bool, len(old))
	matched := make([]bool, len(now))
	take := func(i, j int) {
		used[j], matched[i] = true, true
		o := old[j]
		out.Tasks[i] = TaskEntry{Task: now[i].Index, Text: now[i].Key, State: o.State, Ticket: o.ticket()}
		ch.now[o.Task] = now[i].Index
		if o.Task != now[i].Index {
			ch.Moved = append(ch.Moved, Move{From: o.Task, To: now[i].Index})
		}
	}
	// The k-th task of a text now is the k-th of that text then: two tasks
	// of one text keep their states in their order.
	for i, t := range now {
		for j, o := range old {
			if !used[j] && o.Text == t.Key {
				take(i, j)
				break
			}
		}
	}
	// What the plan no longer holds (a text changed away, a task removed)
	// is kept, latest first, for an edit that is undone.
	earlier, gone := slices.Clone(st.Earlier), []TaskEntry(nil)
	for i, t := range now {
		if matched[i] {
			continue
		}
		out.Tasks[i] = TaskEntry{Task: t.Index, Text: t.Key}
		// A text the plan had before its last run (an edit undone) takes
		// back the state and ticket it had.
		back := false
		if k := slices.IndexFunc(earlier, func(e TaskEntry) bool { return e.Text == t.Key }); k >= 0 {
			out.Tasks[i].State, out.Tasks[i].Ticket, back = earlier[k].State, earlier[k].ticket(), true
			earlier = slices.Delete(earlier, k, k+1)
		}
		if j := slices.IndexFunc(old, func(o TaskEntry) bool { return o.Task == t.Index }); j >= 0 && !used[j] {
			used[j], gone = true, append(gone, old[j])
			ch.Changed = append(ch.Changed, t.Index)
			switch {
			case back:
				ch.Back = append(ch.Back, t.Index)
			case old[j].State != "":
				ch.Again = append(ch.Again, t.Index)
			}
			continue
		}
		if back {
			ch.Back = append(ch.Back, t.Index)
		}
		ch.Inserted = append(ch.Inserted, t.Index)
	}
	for j, o := range old {
		if !used[j] {
			ch.Removed = append(ch.Removed, o.Task)
			gone = append(gone, o)
		}
	}
	out.Earlier = append(gone, earlier...)
	out.Earlier = slices.DeleteFunc(out.Earlier, func(e TaskEntry) bool { return e.State == "" })
	if len(out.Earlier) > maxEarlier {
		out.Earlier = out.Earlier[:maxEarlier]
	}
	if len(out.Earlier) == 0 {
		out.Earlier = nil
	}
	slices.SortFunc(ch.Moved, func(a, b Move) int { return a.To - b.To })
	slices.Sort(ch.Removed)
	out.tickets()
	out.indices()
	return out, ch
}

// ticket is the entry's ticket part.
func (e TaskEntry) ticket() string {
	if e.Ticket != "" {
		return e.Ticket
	}
	return strconv.Itoa(e.Task)
}

// tickets gives every task without a ticket one: its number, or, when a
// task that kept its ticket holds that, its number and the first letter
// that makes it free.
func (st *State) tickets() {
	held := map[string]bool{}
	for i := range st.Tasks {
		e := &st.Tasks[i]
		switch {
		case e.Ticket == "":
		case held[e.Ticket]:
			e.Ticket = "" // a hand-made duplicate: the second gets its own
		default:
			held[e.Ticket] = true
		}
	}
	for i := range st.Tasks {
		e := &st.Tasks[i]
		if e.Ticket != "" {
			continue
		}
		t := strconv.Itoa(e.Task)
		for c := 'b'; held[t] && c <= 'z'; c++ {
			t = strconv.Itoa(e.Task) + string(c)
		}
		e.Ticket = t
		held[t] = true
	}
}

// indices writes the completed and deferred lists from the tasks.
func (st *State) indices() {
	st.CompletedTaskIndices, st.DeferredTaskIndices = []int{}, nil
	for _, e := range st.Tasks {
		switch e.State {
		case taskCompleted:
			st.CompletedTaskIndices = append(st.CompletedTaskIndices, e.Task)
		case taskDeferred:
			st.DeferredTaskIndices = append(st.DeferredTaskIndices, e.Task)
		}
	}
	st.CompletedTaskIndices = normalize(st.CompletedTaskIndices)
	st.DeferredTaskIndices = normalize(st.DeferredTaskIndices)
	if len(st.DeferredTaskIndices) == 0 {
		st.DeferredTaskIndices = nil
	}
}

// Ticket is task's part of its ticket id (see TaskEntry.Ticket).
func (st State) Ticket(task int) string {
	for _, e := range st.Tasks {
		if e.Task == task && e.Ticket != "" {
			return e.Ticket
		}
	}
	return strconv.Itoa(task)
}

// mark sets task's state in the tasks, when they are known.
func (st *State) mark(task int, state string) {
	for i := range st.Tasks {
		if st.Tasks[i].Task == task {
			st.Tasks[i].State = state
		}
	}
}

// earlierOf reads the member "earlier_tasks" of an entry: nothing when it
// cannot be used (it only brings back the state of an edit undone).
func earlierOf(raw json.RawMessage) []TaskEntry {
	var tasks []TaskEntry
	if json.Unmarshal(raw, &tasks) != nil {
		return nil
	}
	return slices.DeleteFunc(tasks, func(e TaskEntry) bool {
		return e.Text == "" || (e.State != taskCompleted && e.State != taskDeferred)
	})
}

// tasksOf reads the member "tasks" of an entry; problem says why it cannot
// be used (the entry is then taken by its numbers).
func tasksOf(raw json.RawMessage) (tasks []TaskEntry, problem string) {
	if err := json.Unmarshal(raw, &tasks); err != nil {
		return nil, "its tasks are not a list of tasks"
	}
	seen := map[int]bool{}
	for _, e := range tasks {
		if e.Task < 0 || e.Text == "" || seen[e.Task] || (e.State != "" && e.State != taskCompleted && e.State != taskDeferred) {
			return nil, fmt.Sprintf("its task %d is not one peal wrote", e.Task)
		}
		seen[e.Task] = true
	}
	if tasks == nil {
		tasks = []TaskEntry{}
	}
	return tasks, ""
}

// moved finds among others the progress of plan kept under the path the
// plan had before it moved: an entry of the same repository whose plan
// file is gone and whose tasks are, for the most part, the plan's tasks
// now. It returns that entry, with the plan's path now, the others without
// it, and the path it had.
func moved(others []json.RawMessage, plan Plan, now []TaskText) (*jsonobj.Object, []json.RawMessage, string) {
	for i, raw := range others {
		o, err := jsonobj.Parse(raw)
		if err != nil {
			continue
		}
		st, problem := readEntry(o)
		if problem != "" || st.Tasks == nil || !safefs.Same(plan.resolve(st.RepoPath), plan.Repo) {
			continue
		}
		was := plan.resolve(st.PlanPath)
		if _, err := os.Lstat(was); err == nil || safefs.Same(was, plan.Path) || !mostlySame(st.Tasks, now) {
			continue
		}
		o.Set("plan_path", plan.Path)
		return o, append(slices.Clone(others[:i]), others[i+1:]...), was
	}
	return nil, others, ""
}

// mostlySame reports whether more than half of the tasks of the larger of
// the two lists have their text in the other.
func mostlySame(kept []TaskEntry, now []TaskText) bool {
	left := map[string]int{}
	for _, e := range kept {
		left[e.Text]++
	}
	same := 0
	for _, t := range now {
		if left[t.Key] > 0 {
			left[t.Key]--
			same++
		}
	}
	return 2*same > max(len(kept), len(now))
}
