package state

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"peal/internal/jsonobj"
	"peal/internal/safefs"
)

// Where the state of a plan lives is noted in the repository's git folder,
// so that a run, `peal status` or `peal report` started from another folder
// (whose state_dir default, .peal there, is another folder) finds it: a
// file per plan and repository in .git/peal/states, named by a hash of the
// two paths and naming the state folder of the plan's last run. git never
// reads it and no commit holds it; a confined call cannot write it. A note
// is only believed when the folder it names holds the plan's state
// (Holds), so a stale or planted one changes nothing.

// maxNote caps what is read of a note.
const maxNote = 64 << 10

// note is one file of the notes folder.
type note struct {
	PlanPath string `json:"plan_path"`
	RepoPath string `json:"repo_path"`
	StateDir string `json:"state_dir"`
	NotedAt  string `json:"noted_at"`
}

// NotesDir is the notes folder of the repository whose git folder (the
// one its worktrees share) is gitDir.
func NotesDir(gitDir string) string { return filepath.Join(gitDir, "peal", "states") }

// noteName is the file of plan's note: the same for every spelling of its
// paths that leads to the same files.
func noteName(plan Plan) string {
	sum := sha256.Sum256([]byte(real(plan.Path) + "\n" + real(plan.Repo)))
	return hex.EncodeToString(sum[:8]) + ".json"
}

// real is path with its links followed, when it exists.
func real(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return filepath.Clean(path)
}

// NoteStateDir notes in notes (NotesDir; "" notes nothing) that plan's
// state lives in dir, written atomically. A note that already says so is
// left as it is.
func NoteStateDir(notes string, plan Plan, dir string, now time.Time) error {
	if notes == "" {
		return nil
	}
	if noted, ok := NotedStateDir(notes, plan); ok && noted == dir {
		return nil
	}
	data, err := json.MarshalIndent(note{PlanPath: plan.Path, RepoPath: plan.Repo, StateDir: dir, NotedAt: now.UTC().Format(time.RFC3339)}, "", "  ")
	if err != nil {
		return err
	}
	return safefs.WriteFile(filepath.Join(notes, noteName(plan)), append(data, '\n'))
}

// NotedStateDir is the state folder notes names for plan, if any.
func NotedStateDir(notes string, plan Plan) (string, bool) {
	if notes == "" {
		return "", false
	}
	data, err := safefs.ReadFile(filepath.Join(notes, noteName(plan)), maxNote)
	var n note
	if err != nil || json.Unmarshal(data, &n) != nil || !filepath.IsAbs(n.StateDir) ||
		!safefs.Same(n.PlanPath, plan.Path) || !safefs.Same(n.RepoPath, plan.Repo) {
		return "", false
	}
	return filepath.Clean(n.StateDir), true
}

// Holds reports whether the state folder dir holds state of plan: its
// progress in state.json, or a run record whose run was of plan (a run
// that completed no task yet still has its tickets' attempts and its
// worktree there). It reads without locking and changes nothing.
func Holds(dir string, plan Plan) bool {
	d, err := safefs.OpenDir(dir, false)
	if err != nil {
		return false
	}
	defer d.Close()
	if f, problem, err := readStateFile(d); err == nil && problem == "" && f.has(plan) {
		return true
	}
	start, ok := firstEvent(d)
	return ok && start.Ev == EvRunStart && plan.matches(State{PlanPath: start.PlanPath, RepoPath: start.RepoPath})
}

// has reports whether the file holds plan's progress.
func (f stateFile) has(plan Plan) bool {
	if f.top == nil {
		return false
	}
	if st, problem := readEntry(f.top); problem == "" && plan.matches(st) {
		return true
	}
	for _, raw := range f.others {
		if o, err := jsonobj.Parse(raw); err == nil {
			if st, problem := readEntry(o); problem == "" && plan.matches(st) {
				return true
			}
		}
	}
	return false
}

// firstEvent is the first line of the folder's run record, read alone.
func firstEvent(d *safefs.Dir) (Event, bool) {
	f, _, err := d.Open(RecordName)
	if err != nil {
		return Event{}, false
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(io.LimitReader(f, maxNote), maxNote).ReadSlice('\n')
	var ev Event
	if err != nil || json.Unmarshal(line, &ev) != nil {
		return Event{}, false
	}
	return ev, true
}

// NotedStateDirs are the state folders notes names, one per plan, in the
// order of the notes' names.
func NotedStateDirs(notes string) []string {
	d, err := safefs.OpenDir(notes, false)
	if err != nil {
		return nil
	}
	defer d.Close()
	entries, err := os.ReadDir(notes)
	if err != nil {
		return nil
	}
	var dirs []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := d.ReadFile(e.Name(), maxNote)
		var n note
		if err == nil && json.Unmarshal(data, &n) == nil && filepath.IsAbs(n.StateDir) && !slices.Contains(dirs, filepath.Clean(n.StateDir)) {
			dirs = append(dirs, filepath.Clean(n.StateDir))
		}
	}
	return dirs
}

// NotedMoved is the state folder notes names for a plan of plan's
// repository whose file is no longer there (was): where the state of plan
// is when plan is that file moved. ok is false when no note says so, or
// when dir holds plan's state already.
func NotedMoved(notes string, plan Plan, dir string) (was, in string, ok bool) {
	d, err := safefs.OpenDir(notes, false)
	if err != nil {
		return "", "", false
	}
	defer d.Close()
	entries, err := os.ReadDir(notes)
	if err != nil || Holds(dir, plan) {
		return "", "", false
	}
	for _, e := range entries {
		data, err := d.ReadFile(e.Name(), maxNote)
		var n note
		if err != nil || json.Unmarshal(data, &n) != nil || !filepath.IsAbs(n.StateDir) || !filepath.IsAbs(n.PlanPath) ||
			!safefs.Same(n.RepoPath, plan.Repo) || safefs.Same(n.PlanPath, plan.Path) || safefs.Same(n.StateDir, dir) {
			continue
		}
		if _, err := os.Lstat(n.PlanPath); err == nil {
			continue
		}
		if Holds(n.StateDir, Plan{Path: n.PlanPath, Repo: plan.Repo}) {
			return n.PlanPath, filepath.Clean(n.StateDir), true
		}
	}
	return "", "", false
}
