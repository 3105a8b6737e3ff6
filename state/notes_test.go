package state

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestNoteStateDir: a note names the state folder of one plan and
// repository, whatever the spelling of their paths; rewriting it changes
// only what changed; a note of another plan, or one that cannot be read,
// names nothing.
func TestNoteStateDir(t *testing.T) {
	t.Parallel()
	base, p, dir := scratch(t)
	notes := NotesDir(filepath.Join(p.Repo, ".git"))
	if got := filepath.Join(p.Repo, ".git", "peal", "states"); notes != got {
		t.Fatalf("notes folder %s, want %s", notes, got)
	}
	if _, ok := NotedStateDir(notes, p); ok {
		t.Fatal("a note before any")
	}
	if err := NoteStateDir("", p, dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := NoteStateDir(notes, p, dir, time.Unix(100, 0)); err != nil {
		t.Fatal(err)
	}
	if got, ok := NotedStateDir(notes, p); !ok || got != dir {
		t.Fatalf("noted %q %v, want %s", got, ok, dir)
	}
	// Another spelling of the same plan: through a link to its folder.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(base, link); err != nil {
		t.Fatal(err)
	}
	if got, ok := NotedStateDir(notes, Plan{Path: filepath.Join(link, "plan.md"), Repo: filepath.Join(link, "repo")}); !ok || got != dir {
		t.Fatalf("through a link: noted %q %v", got, ok)
	}
	entries, _ := os.ReadDir(notes)
	if len(entries) != 1 {
		t.Fatalf("%d files in the notes folder, want 1: %v", len(entries), entries)
	}
	name := filepath.Join(notes, entries[0].Name())
	before, _ := os.ReadFile(name)
	if err := NoteStateDir(notes, p, dir, time.Unix(200, 0)); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(name); string(after) != string(before) {
		t.Fatalf("an unchanged note was written again:\n%s\n%s", before, after)
	}
	other := plan(t, base, "other.md")
	if _, ok := NotedStateDir(notes, other); ok {
		t.Fatal("another plan's note")
	}
	os.WriteFile(name, []byte("{not json"), 0o644)
	if _, ok := NotedStateDir(notes, p); ok {
		t.Fatal("a broken note believed")
	}
}

// TestHolds: a state folder holds a plan's state when state.json keeps its
// progress (at the top or among other_plans), or when its run record is of
// a run of the plan.
func TestHolds(t *testing.T) {
	t.Parallel()
	base, p, dir := scratch(t)
	other := plan(t, base, "other.md")
	if Holds(dir, p) {
		t.Fatal("a folder that does not exist holds state")
	}
	mkdir(t, dir)
	if Holds(dir, p) {
		t.Fatal("an empty folder holds state")
	}
	s, _, err := Open(dir, p, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if !Holds(dir, p) || Holds(dir, other) {
		t.Fatal("state.json of the plan")
	}
	s, _, err = Open(dir, other, time.Now()) // p moves to other_plans
	if err != nil {
		t.Fatal(err)
	}
	s.Complete(1)
	s.Close()
	if !Holds(dir, p) || !Holds(dir, other) {
		t.Fatal("a plan among other_plans")
	}

	recorded := filepath.Join(base, "recorded")
	mkdir(t, recorded)
	os.WriteFile(filepath.Join(recorded, RecordName), []byte(`{"ev":"run_start","t":"2026-01-01T00:00:00Z","plan_path":"`+p.Path+`","repo_path":"`+p.Repo+`"}`+"\n"+`{"ev":"run_end"}`+"\n"), 0o644)
	if !Holds(recorded, p) || Holds(recorded, other) {
		t.Fatal("a run record of the plan")
	}
}
