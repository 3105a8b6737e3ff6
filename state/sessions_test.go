package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var sessionsNow = time.Date(2026, 11, 27, 1, 2, 3, 0, time.UTC)

func openSessions(t *testing.T, dir string, plan Plan) (*Sessions, []string) {
	t.Helper()
	s, warnings, err := OpenSessions(dir, plan, sessionsNow)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, warnings
}

// TestSessionsKeptAcrossRuns: a session put by one run is found by the
// next, for its plan, task and agent only; dropping a task's sessions
// forgets them on disk.
func TestSessionsKeptAcrossRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	planA := Plan{Path: "/p/a.md", Repo: "/r"}
	planB := Plan{Path: "/p/b.md", Repo: "/r"}
	s, warnings := openSessions(t, dir, planA)
	if len(warnings) > 0 {
		t.Fatal(warnings)
	}
	if _, ok := s.Get(1, "primary"); ok {
		t.Fatal("a fresh folder holds a session")
	}
	count := &Usage{InputTokens: 240, OutputTokens: 45, CachedTokens: 14}
	for _, x := range []Session{
		{Task: 1, Role: "primary", Kind: "codex", ID: "01a21a7f-6211-7fc0-9a1e-a0fa8555ca1f", Dir: "/r", Began: sessionsNow, Count: count},
		{Task: 1, Role: "fallback", Kind: "claude", ID: "be06e92d-7e30-408b-a760-4199698be73e", Dir: "/r", Began: sessionsNow},
		{Task: 2, Role: "primary", Kind: "codex", ID: "01a21a7f-6211-7fc0-9a1e-a0fa8555ca20", Dir: "/wt/task-2", Began: sessionsNow},
	} {
		if err := s.Put(x); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	other, _ := openSessions(t, dir, planB)
	if _, ok := other.Get(1, "primary"); ok {
		t.Fatal("another plan's task 1 sees plan a's session")
	}
	if err := other.Put(Session{Task: 1, Role: "primary", Kind: "gemini", ID: "f6581809-0c11-4c02-815b-b4e7709e0ba8", Dir: "/r", Began: sessionsNow}); err != nil {
		t.Fatal(err)
	}
	other.Close()

	s, _ = openSessions(t, dir, planA)
	x, ok := s.Get(1, "primary")
	if !ok || x.ID != "01a21a7f-6211-7fc0-9a1e-a0fa8555ca1f" || x.Kind != "codex" || x.Dir != "/r" || x.Count == nil || *x.Count != *count || !x.Began.Equal(sessionsNow) {
		t.Fatalf("task 1 primary: %+v %v", x, ok)
	}
	if x, ok := s.Get(1, "fallback"); !ok || x.Kind != "claude" {
		t.Fatalf("task 1 fallback: %+v %v", x, ok)
	}
	if err := s.Drop(1, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.DropIf(func(task int) bool { return task == 2 }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, _ = openSessions(t, dir, planA)
	for _, k := range []struct {
		task int
		role string
	}{{1, "primary"}, {1, "fallback"}, {2, "primary"}} {
		if _, ok := s.Get(k.task, k.role); ok {
			t.Fatalf("task %d %s kept after it was dropped", k.task, k.role)
		}
	}
	b, _ := openSessions(t, dir, planB)
	if x, ok := b.Get(1, "primary"); !ok || x.Kind != "gemini" {
		t.Fatalf("plan b's session was lost with plan a's: %+v %v", x, ok)
	}
}

// TestSessionsUnreadable: a file that cannot be read is kept aside and
// holds no session; a session that is not whole is dropped with a warning;
// neither stops the run.
func TestSessionsUnreadable(t *testing.T) {
	t.Parallel()
	plan := Plan{Path: "/p/a.md", Repo: "/r"}
	cases := []struct {
		name    string
		make    func(path string) error
		aside   bool
		warning string
	}{
		{"garbage", func(p string) error { return os.WriteFile(p, []byte("{not json"), 0o644) }, true, "it is not valid JSON"},
		{"empty", func(p string) error { return os.WriteFile(p, nil, 0o644) }, true, "it is empty"},
		{"too large", func(p string) error { return os.WriteFile(p, make([]byte, maxSessionsFile+1), 0o644) }, true, "larger than 4 MiB"},
		{"a folder", func(p string) error { return os.Mkdir(p, 0o755) }, true, "not a regular file"},
		{"an id that is an option", func(p string) error {
			return os.WriteFile(p, []byte(`{"sessions":[{"plan_path":"/p/a.md","repo_path":"/r","task":1,"role":"primary","kind":"codex","id":"--last","dir":"/r"}]}`), 0o644)
		}, false, `its id "--last" is not one a CLI gives`},
		{"no id", func(p string) error {
			return os.WriteFile(p, []byte(`{"sessions":[{"plan_path":"/p/a.md","repo_path":"/r","task":1,"role":"primary","kind":"codex","id":"","dir":"/r"}]}`), 0o644)
		}, false, "it has no id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := tc.make(filepath.Join(dir, SessionsName)); err != nil {
				t.Fatal(err)
			}
			s, warnings := openSessions(t, dir, plan)
			if len(warnings) != 1 || !strings.Contains(warnings[0], tc.warning) {
				t.Fatalf("warnings %q, want one saying %q", warnings, tc.warning)
			}
			if _, ok := s.Get(1, "primary"); ok {
				t.Fatal("a session was read from it")
			}
			_, err := os.Lstat(filepath.Join(dir, SessionsName+".corrupt-20261127T010203Z"))
			if (err == nil) != tc.aside {
				t.Fatalf("kept aside: %v, want %v", err == nil, tc.aside)
			}
			// The sessions go on being kept.
			if err := s.Put(Session{Task: 3, Role: "primary", Kind: "claude", ID: "be06e92d-7e30-408b-a760-4199698be73e", Dir: "/r"}); err != nil {
				t.Fatal(err)
			}
			if _, ok := s.Get(3, "primary"); !ok {
				t.Fatal("no session kept after an unreadable file")
			}
		})
	}
}

// TestSessionsTempsRemoved: what a save cut short by a kill left behind is
// removed when the next run opens the sessions.
func TestSessionsTempsRemoved(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	left := filepath.Join(dir, ".sessions.json.tmp-123")
	if err := os.WriteFile(left, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	openSessions(t, dir, Plan{Path: "/p/a.md", Repo: "/r"})
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("the temporary file of a killed save is still there: %v", err)
	}
}

// TestSessionsPutRefusesWhatCannotBeContinued: a session without an id, or
// with one that could pass for an option, is never kept.
func TestSessionsPutRefusesWhatCannotBeContinued(t *testing.T) {
	t.Parallel()
	s, _ := openSessions(t, t.TempDir(), Plan{Path: "/p/a.md", Repo: "/r"})
	for _, id := range []string{"", "-c", "a b", "x\x00"} {
		if err := s.Put(Session{Task: 1, Role: "primary", Kind: "claude", ID: id, Dir: "/r"}); err == nil {
			t.Errorf("the id %q was kept", id)
		}
	}
}
