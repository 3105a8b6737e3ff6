package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"peal/internal/testkit/safefstest"
	"peal/tickets"
)

// plan makes a plan file and a repository folder in a fresh folder.
func plan(t *testing.T, base, name string) Plan {
	t.Helper()
	repo := filepath.Join(base, "repo")
	os.MkdirAll(repo, 0o755)
	p := filepath.Join(base, name)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte("## Task 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return Plan{Path: p, Repo: repo, Base: base}
}

// scratch is a temporary folder with a plan (plan.md) and, not yet made, a
// state folder in it.
func scratch(t *testing.T) (base string, p Plan, dir string) {
	t.Helper()
	base = t.TempDir()
	return base, plan(t, base, "plan.md"), filepath.Join(base, "state")
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func openStore(t *testing.T, dir string, p Plan) (*Store, []string) {
	t.Helper()
	s, warnings, err := Open(dir, p, at(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, warnings
}

// fileOf reads state.json as a generic document.
func fileOf(t *testing.T, dir string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	return jsonValue(t, data).(map[string]any)
}

func nums(xs ...int) []any {
	out := []any{}
	for _, x := range xs {
		out = append(out, json.Number(fmt.Sprint(x)))
	}
	return out
}

// TestOpenLocksTheFolder: while a run holds the state folder a second one
// stops at once, with one line naming the folder and what to do; reading
// (status, dry run) never needs the lock.
func TestOpenLocksTheFolder(t *testing.T) {
	t.Parallel()
	_, p, dir := scratch(t)
	first, _ := openStore(t, dir, p)
	_, _, err := Open(dir, p, at(1))
	if !errors.Is(err, ErrStateLocked) {
		t.Fatalf("second open: %v", err)
	}
	want := fmt.Sprintf("state folder %s is in use by another peal run (it holds %s): wait for that run to end, or give this run its own state folder (state_dir, --state-dir)",
		dir, filepath.Join(dir, LockName))
	if err.Error() != want {
		t.Errorf("message\n got %s\nwant %s", err, want)
	}
	if _, _, _, err := Peek(dir, p, nil); err != nil {
		t.Errorf("Peek while locked: %v", err)
	}
	if err := first.Complete(1); err != nil {
		t.Fatal(err)
	}
	first.Close()
	second, _ := openStore(t, dir, p)
	if !second.Completed(1) {
		t.Error("the next run does not see the first one's work")
	}
	if err := first.Complete(2); err == nil {
		t.Error("a closed store saved")
	}
}

// TestPlansNeverCross: a, then b, then a again from one state folder: a's
// progress is back, and the top level of state.json is always the plan of
// the latest run, in Peal's shape.
func TestPlansNeverCross(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	a, b := plan(t, base, "a.md"), plan(t, base, "b.md")
	dir := filepath.Join(base, "state")
	run := func(p Plan, done ...int) *Store {
		s, warnings := openStore(t, dir, p)
		if len(warnings) > 0 {
			t.Fatalf("warnings %q", warnings)
		}
		for _, i := range done {
			if err := s.Complete(i); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Save(); err != nil {
			t.Fatal(err)
		}
		s.Close()
		return s
	}
	run(a, 1, 2)
	run(b, 1)
	doc := fileOf(t, dir)
	if doc["plan_path"] != b.Path || !reflect.DeepEqual(doc["completed_task_indices"], nums(1)) {
		t.Fatalf("top level after b: %v", doc)
	}
	others := doc["other_plans"].([]any)
	if len(others) != 1 || others[0].(map[string]any)["plan_path"] != a.Path || !reflect.DeepEqual(others[0].(map[string]any)["completed_task_indices"], nums(1, 2)) {
		t.Fatalf("other plans after b: %v", others)
	}
	s, _ := openStore(t, dir, a)
	if !s.Completed(1) || !s.Completed(2) || s.Completed(3) {
		t.Fatalf("a's progress after b: %+v", s.Snapshot())
	}
	s.Complete(3)
	s.Close()
	doc = fileOf(t, dir)
	if doc["plan_path"] != a.Path || !reflect.DeepEqual(doc["completed_task_indices"], nums(1, 2, 3)) || len(doc["other_plans"].([]any)) != 1 ||
		doc["other_plans"].([]any)[0].(map[string]any)["plan_path"] != b.Path {
		t.Fatalf("after a again: %v", doc)
	}
	if st, _, _, _ := Peek(dir, b, nil); !slices.Equal(st.CompletedTaskIndices, []int{1}) || st.PlanPath != b.Path {
		t.Errorf("Peek of b: %+v", st)
	}
	// The same plan in another repository is another plan.
	c := a
	c.Repo = filepath.Join(base, "other-repo")
	if st, _, _, _ := Peek(dir, c, nil); len(st.CompletedTaskIndices) != 0 || st.RepoPath != c.Repo {
		t.Errorf("Peek of a in another repository: %+v", st)
	}
}

// TestPealStateResumes: a state.json as Peal writes it (its command line's
// relative paths, fields peal does not use) resumes, and a rewrite keeps
// every member as it was.
func TestPealStateResumes(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	p := plan(t, base, "plans/p.md")
	dir := filepath.Join(base, ".peal")
	os.MkdirAll(dir, 0o755)
	peal := `{
  "plan_path": "plans/p.md",
  "repo_path": "./repo",
  "completed_task_indices": [
    0,
    2
  ],
  "last_plan_by_task": {
    "2": "the plan of task 2"
  },
  "last_completed_ref": "abc123",
  "from_a_newer_peal": {"x": [1.50, null]}
}`
	os.WriteFile(filepath.Join(dir, FileName), []byte(peal), 0o600)
	s, warnings := openStore(t, dir, p)
	if len(warnings) > 0 || !s.Completed(0) || !s.Completed(2) || s.Completed(1) {
		t.Fatalf("not resumed: %+v, %q", s.Snapshot(), warnings)
	}
	if err := s.Complete(1); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, FileName))
	want := `{
  "plan_path": "plans/p.md",
  "repo_path": "./repo",
  "completed_task_indices": [
    0,
    1,
    2
  ],
  "last_plan_by_task": {
    "2": "the plan of task 2"
  },
  "last_completed_ref": "abc123",
  "from_a_newer_peal": {
    "x": [
      1.50,
      null
    ]
  }
}
`
	if string(data) != want {
		t.Errorf("rewritten as\n%s", data)
	}
	if info, _ := os.Stat(filepath.Join(dir, FileName)); info.Mode().Perm() != 0o600 {
		t.Errorf("the file's mode became %v", info.Mode().Perm())
	}
	// Relative to another folder, the same text names another plan.
	elsewhere := p
	elsewhere.Base = filepath.Join(base, "plans")
	if st, _, _, _ := Peek(dir, elsewhere, nil); len(st.CompletedTaskIndices) != 0 {
		t.Errorf("matched from another working folder: %+v", st)
	}
}

// TestUnreadableStateKeptAside: every unreadable file is kept under a name
// of its own, even three within one second, with a plain one-line reason.
func TestUnreadableStateKeptAside(t *testing.T) {
	t.Parallel()
	_, p, dir := scratch(t)
	mkdir(t, dir)
	contents := map[string]string{
		"not json":          "{\"plan_path\": ",
		"plan_path number":  `{"plan_path": 3, "repo_path": "/r", "completed_task_indices": []}`,
		"indices text":      `{"plan_path": "/p", "repo_path": "/r", "completed_task_indices": "1,2"}`,
		"negative index":    `{"plan_path": "/p", "repo_path": "/r", "completed_task_indices": [-1]}`,
		"no indices":        `{"plan_path": "/p", "repo_path": "/r"}`,
		"other_plans":       `{"plan_path": "/p", "repo_path": "/r", "completed_task_indices": [], "other_plans": {}}`,
		"escape sequence":   "{\"plan_path\": \"\x1b]0;x\x07",
		"empty":             "",
		"deferred not list": `{"plan_path": "/p", "repo_path": "/r", "completed_task_indices": [], "deferred_task_indices": 1}`,
	}
	var names []string
	for name := range contents {
		names = append(names, name)
	}
	slices.Sort(names)
	for i, name := range names {
		os.WriteFile(filepath.Join(dir, FileName), []byte(contents[name]), 0o644)
		s, warnings, err := Open(dir, p, at(0))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s.Close()
		aside := filepath.Join(dir, "state.json.corrupt-20260210T120000Z")
		if i > 0 {
			aside += fmt.Sprintf(".%d", i)
		}
		if len(warnings) != 1 || !strings.Contains(warnings[0], "kept it as "+aside+" and started fresh") {
			t.Errorf("%s: warnings %q", name, warnings)
		}
		for _, w := range warnings {
			plainLine(t, name, w)
		}
		if kept, _ := os.ReadFile(aside); string(kept) != contents[name] {
			t.Errorf("%s: kept %q", name, kept)
		}
	}
}

// TestStaleTemporaryFilesRemoved: what a killed save left is removed by the
// next run, under the lock; never by a reader.
func TestStaleTemporaryFilesRemoved(t *testing.T) {
	t.Parallel()
	_, p, dir := scratch(t)
	mkdir(t, dir)
	stale := []string{".state.json.tmp-12345", ".state.json.tmp-x", ".run_summary.json.tmp-9", ".peal-write-check.tmp-7"}
	for _, name := range append(stale, "keep.txt") {
		os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644)
	}
	if _, _, _, err := Peek(dir, p, nil); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*")); len(left) != len(stale) {
		t.Fatalf("Peek removed files: %v", left)
	}
	openStore(t, dir, p)
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("left %v", left)
	}
	if _, err := os.Stat(filepath.Join(dir, "keep.txt")); err != nil {
		t.Error("removed a file that is not a temporary one")
	}
}

// TestNoRewriteWhenUnchanged: a save that would write what the file says
// does not touch it.
func TestNoRewriteWhenUnchanged(t *testing.T) {
	t.Parallel()
	_, p, dir := scratch(t)
	s, _ := openStore(t, dir, p)
	s.Complete(1)
	before, _ := os.Stat(filepath.Join(dir, FileName))
	s.Complete(1)
	s.Save()
	s.Close()
	s2, _ := openStore(t, dir, p)
	s2.Save()
	after, _ := os.Stat(filepath.Join(dir, FileName))
	if !os.SameFile(before, after) {
		t.Error("state.json was written again with the same content")
	}
}

func TestSpecialStateFiles(t *testing.T) {
	t.Parallel()
	for name, setup := range map[string]func(path string) error{
		"link to /dev/zero": func(path string) error { return os.Symlink("/dev/zero", path) },
		"link to a file":    func(path string) error { return os.Symlink(filepath.Join(filepath.Dir(path), "elsewhere"), path) },
		"folder":            func(path string) error { return os.Mkdir(path, 0o755) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, p, dir := scratch(t)
			mkdir(t, dir)
			os.WriteFile(filepath.Join(dir, "elsewhere"), []byte(`{}`), 0o644)
			if err := setup(filepath.Join(dir, FileName)); err != nil {
				t.Fatal(err)
			}
			for _, err := range []error{
				func() error { _, _, err := Open(dir, p, at(0)); return err }(),
				func() error { _, _, _, err := Peek(dir, p, nil); return err }(),
			} {
				if err == nil || !strings.Contains(err.Error(), "not a regular file: peal neither reads it nor writes through it; remove it") {
					t.Errorf("error %v", err)
				}
			}
			if _, _, err := Open(dir, p, at(0)); err == nil {
				t.Error("the failed open kept the lock or the file changed")
			}
			if data, _ := os.ReadFile(filepath.Join(dir, "elsewhere")); string(data) != `{}` {
				t.Error("the link's target was changed")
			}
		})
	}
}

// TestReadOnlyStateFolder: a folder peal cannot write to is found when the
// run starts, before any work depends on it.
func TestReadOnlyStateFolder(t *testing.T) {
	t.Parallel()
	_, p, dir := scratch(t)
	s, _ := openStore(t, dir, p) // state.lock exists from an earlier run
	s.Close()
	safefstest.ReadOnly(t, dir)
	_, _, err := Open(dir, p, at(0))
	if err == nil || !strings.HasPrefix(err.Error(), "state folder "+dir+" cannot be written to (") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %v", err)
	}
	// The failed Open let go of the lock it had taken: a second try meets
	// the same problem, not "in use by another peal run".
	if _, _, err := Open(dir, p, at(0)); err == nil || errors.Is(err, ErrStateLocked) {
		t.Fatalf("second open: %v", err)
	}
	if _, _, _, err := Peek(dir, p, nil); err != nil {
		t.Errorf("reading a read-only folder: %v", err)
	}
	if err := tickets.CheckStore(filepath.Join(dir, "knowledge")); err == nil || !strings.Contains(err.Error(), "retry-state store "+filepath.Join(dir, "knowledge")+" cannot be written to") {
		t.Errorf("store in a read-only folder: %v", err)
	}
}

func TestLinkedStateLock(t *testing.T) {
	t.Parallel()
	base, p, dir := scratch(t)
	mkdir(t, dir)
	target := filepath.Join(base, "created-by-peal")
	os.Symlink(target, filepath.Join(dir, LockName))
	_, _, err := Open(dir, p, at(0))
	if err == nil || err.Error() != filepath.Join(dir, LockName)+" is a symbolic link, not a regular file: peal does not follow links or use special files in its state folder; remove it, or choose another state folder (state_dir, --state-dir)" {
		t.Errorf("error %v", err)
	}
	if _, err := os.Lstat(target); err == nil {
		t.Error("the link's target was created")
	}
}

func TestStateFolderIsAFile(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	p := plan(t, base, "plan.md")
	file := filepath.Join(base, "state")
	os.WriteFile(file, nil, 0o644)
	if _, _, err := Open(file, p, at(0)); err == nil || err.Error() != "state folder "+file+" cannot be used (not a directory): fix it, or choose another state folder (state_dir, --state-dir)" {
		t.Errorf("Open: %v", err)
	}
	if _, _, _, err := Peek(file, p, nil); err == nil || err.Error() != "state folder "+file+" is not a folder: choose another state folder (state_dir, --state-dir)" {
		t.Errorf("Peek: %v", err)
	}
}
