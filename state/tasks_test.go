package state

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	planfmt "peal/plan"
)

// texts are tasks numbered from 1 with the given texts.
func texts(words ...string) []TaskText {
	out := make([]TaskText, len(words))
	for i, w := range words {
		out[i] = TaskText{Index: i + 1, Key: planfmt.TextKey(w)}
	}
	return out
}

// ran is the state a run of tasks leaves with the given tasks completed.
func ran(tasks []TaskText, completed ...int) State {
	st, _ := State{}.Align(tasks)
	st.Tasks = slices.Clone(st.Tasks)
	for _, i := range completed {
		st.mark(i, taskCompleted)
	}
	st.indices()
	return st
}

// TestAlign: a task is known by its text. A completed task whose text
// changed is pending again, an inserted one is pending, a moved one keeps
// its state and its ticket, a removed one is named; white space alone is no
// change; a state without texts is taken by its numbers.
func TestAlign(t *testing.T) {
	t.Parallel()
	ab := texts("write A", "write B")
	edited, _ := ran(ab, 1, 2).Align(texts("write A2", "write B"))
	cases := []struct {
		name          string
		before        State
		now           []TaskText
		completed     []int
		tickets       []string
		line          string
		changed, news []int
		moved         []Move
		removed       []int
	}{
		{name: "unchanged", before: ran(ab, 1, 2), now: ab, completed: []int{1, 2}, tickets: []string{"1", "2"},
			line: "the plan's tasks are as its last run read them"},
		{name: "white space only", before: ran(ab, 1, 2), now: texts("write   A\n", "  write\nB"), completed: []int{1, 2}, tickets: []string{"1", "2"},
			line: "the plan's tasks are as its last run read them"},
		{name: "a completed task's text changed", before: ran(ab, 1, 2), now: texts("write A2", "write B"), completed: []int{2}, tickets: []string{"1", "2"},
			changed: []int{1}, line: "the plan changed since its last run: task 1 changed (it was done for the old text: it runs again)"},
		{name: "inserted", before: ran(ab, 1, 2), now: texts("write A", "write NEW", "write B"), completed: []int{1, 3}, tickets: []string{"1", "2b", "2"},
			news: []int{2}, moved: []Move{{2, 3}}, line: "the plan changed since its last run: task 2 new; renumbered 2→3 (each keeps its state and ticket)"},
		{name: "appended", before: ran(ab, 1, 2), now: texts("write A", "write B", "write C"), completed: []int{1, 2}, tickets: []string{"1", "2", "3"},
			news: []int{3}, line: "the plan changed since its last run: task 3 new"},
		{name: "removed", before: ran(texts("write A", "write B", "write C"), 1, 2), now: texts("write A", "write C"), completed: []int{1}, tickets: []string{"1", "3"},
			moved: []Move{{3, 2}}, removed: []int{2}, line: "the plan changed since its last run: renumbered 3→2 (each keeps its state and ticket); task 2 of the last run removed"},
		{name: "swapped", before: ran(ab, 2), now: texts("write B", "write A"), completed: []int{1}, tickets: []string{"2", "1"},
			moved: []Move{{2, 1}, {1, 2}}, line: "the plan changed since its last run: renumbered 2→1, 1→2 (each keeps its state and ticket)"},
		{name: "the same text twice", before: ran(texts("lint", "lint"), 1), now: texts("x", "lint", "lint"), completed: []int{2}, tickets: []string{"1b", "1", "2"},
			news: []int{1}, moved: []Move{{1, 2}, {2, 3}}, line: "the plan changed since its last run: task 1 new; renumbered 1→2, 2→3 (each keeps its state and ticket)"},
		{name: "written by Peal", before: State{CompletedTaskIndices: []int{1, 2}}, now: texts("write A", "write NEW", "write B"), completed: []int{1, 2}, tickets: []string{"1", "2", "3"},
			line: "the state holds no texts of the tasks (written by Peal or an earlier peal): its task numbers are taken as they are, and the tasks' texts are recorded from now on"},
		{name: "first run", now: ab, completed: []int{}, tickets: []string{"1", "2"}},
		{name: "an edit undone", before: edited, now: ab, completed: []int{1, 2}, tickets: []string{"1", "2"},
			changed: []int{1}, line: "the plan changed since its last run: task 1 changed; task 1 back to an earlier text (the state it had goes with it)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, ch := tc.before.Align(tc.now)
			if !slices.Equal(st.CompletedTaskIndices, tc.completed) {
				t.Errorf("completed %v, want %v", st.CompletedTaskIndices, tc.completed)
			}
			var tickets []string
			for _, x := range tc.now {
				tickets = append(tickets, st.Ticket(x.Index))
			}
			if !slices.Equal(tickets, tc.tickets) {
				t.Errorf("tickets %v, want %v", tickets, tc.tickets)
			}
			if !slices.Equal(ch.Changed, tc.changed) || !slices.Equal(ch.Inserted, tc.news) || !slices.Equal(ch.Moved, tc.moved) || !slices.Equal(ch.Removed, tc.removed) {
				t.Errorf("changes %+v", ch)
			}
			if got := ch.Line(); got != tc.line {
				t.Errorf("line %q\nwant %q", got, tc.line)
			}
		})
	}
}

// TestChangesNow: the numbers of the last run lead to the numbers of now,
// and a task that is gone leads nowhere.
func TestChangesNow(t *testing.T) {
	t.Parallel()
	_, ch := ran(texts("A", "B", "C"), 1).Align(texts("A", "NEW", "C"))
	for was, want := range map[int]int{1: 1, 3: 3} {
		if n, ok := ch.Now(was); !ok || n != want {
			t.Errorf("task %d of the last run is now %d %v, want %d", was, n, ok, want)
		}
	}
	if n, ok := ch.Now(2); ok {
		t.Errorf("the changed task 2 leads to %d", n)
	}
	if _, ch := (State{CompletedTaskIndices: []int{4}}).Align(texts("A")); !func() bool { n, ok := ch.Now(4); return ok && n == 4 }() {
		t.Error("a state without texts changes no number")
	}
}

// TestStoreRecordsTexts: a store aligned to the plan writes Peal's index
// list in the numbers of now and the tasks' texts, and a later open of the
// edited plan takes them back; members it does not use stay as written.
func TestStoreRecordsTexts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := plan(t, t.TempDir(), "plan.md")
	os.WriteFile(filepath.Join(dir, FileName), []byte(`{"plan_path": "`+p.Path+`", "repo_path": "`+p.Repo+`", "completed_task_indices": [1], "last_completed_ref": "abc"}`), 0o644)
	s, _, err := Open(dir, p, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if ch := s.Align(texts("write A", "write B")); !ch.Numbered || !s.Completed(1) {
		t.Fatalf("Peal's state: %+v", ch)
	}
	if err := s.Complete(2); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var doc map[string]any
	data, _ := os.ReadFile(filepath.Join(dir, FileName))
	json.Unmarshal(data, &doc)
	if doc["last_completed_ref"] != "abc" || !strings.Contains(string(data), `"tasks"`) {
		t.Fatalf("state.json %s", data)
	}

	s, _, err = Open(dir, p, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ch := s.Align(texts("write A", "write NEW", "write B"))
	if !ch.Known || !slices.Equal(ch.Inserted, []int{2}) || !s.Completed(1) || s.Completed(2) || !s.Completed(3) || s.Ticket(2) != "2b" {
		t.Fatalf("changes %+v, state %+v", ch, s.Snapshot())
	}
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var st State
	data, _ = os.ReadFile(filepath.Join(dir, FileName))
	json.Unmarshal(data, &st)
	if !slices.Equal(st.CompletedTaskIndices, []int{1, 3}) || len(st.Tasks) != 3 {
		t.Fatalf("state.json %s", data)
	}
}

// TestUnusableTasksMember: a member "tasks" that peal did not write is not
// used, with a line saying so; the numbers are taken as they are, and
// nothing is set aside.
func TestUnusableTasksMember(t *testing.T) {
	t.Parallel()
	for _, tasks := range []string{`"x"`, `[{"task": 1}]`, `[{"task": 1, "text": "k", "state": "done"}]`} {
		dir := t.TempDir()
		p := plan(t, t.TempDir(), "plan.md")
		os.WriteFile(filepath.Join(dir, FileName), []byte(`{"plan_path": "`+p.Path+`", "repo_path": "`+p.Repo+`", "completed_task_indices": [1], "tasks": `+tasks+`}`), 0o644)
		st, ch, warnings, err := Peek(dir, p, texts("A"))
		if err != nil || len(warnings) != 0 {
			t.Fatal(err, warnings)
		}
		if !strings.HasPrefix(ch.Line(), "the tasks kept in the state cannot be used (") || !slices.Equal(st.CompletedTaskIndices, []int{1}) {
			t.Errorf("%s: %q, %v", tasks, ch.Line(), st.CompletedTaskIndices)
		}
	}
}
