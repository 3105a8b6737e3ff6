package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"peal/internal/procs"
	"peal/internal/safefs"
)

// One run at a time on a repository. Two runs on one work tree (another
// plan, another state folder) would commit, merge and bring work back over
// each other's changes: the second one's end fails, or worse, succeeds on
// the first one's half-done tree. So a run holds the repository for its
// whole length: a lock in the folder of peal's notes in the repository's
// git folder (the one its worktrees share), .git/peal/run.lock, an advisory
// flock the kernel drops however the run ends, and beside it a note naming
// the run (run.json), which the run removes at its end. A confined call
// cannot write either.

// The files of a repository's hold.
const (
	repoLockName = "run.lock"
	runNoteName  = "run.json"
)

// RunNote is what a run notes of itself while it holds the repository.
type RunNote struct {
	PID       int    `json:"pid"`
	PlanPath  string `json:"plan_path"`
	StateDir  string `json:"state_dir"`
	StartedAt string `json:"started_at"`
}

// ErrRepoInUse is matched (errors.Is) by the error of LockRepo when another
// run holds the repository.
var ErrRepoInUse = errors.New("repository in use")

// RepoInUseError names the run that holds a repository.
type RepoInUseError struct {
	Repo  string
	Other RunNote // zero when its note cannot be read
}

func (e *RepoInUseError) Error() string {
	who := "another peal run"
	if o := e.Other; o.PID > 0 {
		who = fmt.Sprintf("another peal run (pid %d, plan %s, state folder %s, started %s)", o.PID, o.PlanPath, o.StateDir, o.StartedAt)
	}
	return fmt.Sprintf("repository %s is in use by %s: wait for it to end; two runs on one repository would work over each other's changes", e.Repo, who)
}

func (e *RepoInUseError) Is(target error) bool { return target == ErrRepoInUse }

// RepoHold is a repository held by a run.
type RepoHold struct {
	dir  *safefs.Dir
	lock *safefs.Lock
}

// peal is the folder of peal's notes in a repository whose notes folder
// (NotesDir) is notes.
func pealDir(notes string) string { return filepath.Dir(notes) }

// LockRepo holds the repository at repo, whose notes folder (NotesDir) is
// notes, for a run described by me; "" notes holds nothing (a repository
// whose git folder is not known). Another run holding it is an error
// naming that run (a *RepoInUseError).
func LockRepo(notes, repo string, me RunNote) (*RepoHold, error) {
	if notes == "" {
		return nil, nil
	}
	d, err := safefs.OpenDir(pealDir(notes), true)
	if err != nil {
		return nil, fmt.Errorf("peal's notes in the repository's git folder, %s: %w", pealDir(notes), err)
	}
	lock, err := d.Lock(repoLockName)
	if errors.Is(err, safefs.ErrLocked) {
		other, _ := readRunNote(d)
		d.Close()
		return nil, &RepoInUseError{Repo: repo, Other: other}
	}
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("holding repository %s for the run: %w", repo, err)
	}
	h := &RepoHold{dir: d, lock: lock}
	data, _ := json.MarshalIndent(me, "", "  ")
	if err := d.WriteFile(runNoteName, append(data, '\n')); err != nil {
		h.Close()
		return nil, fmt.Errorf("noting the run in %s: %w", d.Join(runNoteName), err)
	}
	return h, nil
}

// Close removes the run's note and lets go of the repository. Closing a nil
// hold, or twice, is harmless.
func (h *RepoHold) Close() {
	if h == nil || h.lock == nil {
		return
	}
	h.dir.Remove(runNoteName)
	h.lock.Close()
	h.dir.Close()
	h.lock = nil
}

// Running is the run holding the repository whose notes folder is notes,
// read without taking anything: its note, when the process that wrote it
// is alive.
func Running(notes string) (RunNote, bool) {
	if notes == "" {
		return RunNote{}, false
	}
	d, err := safefs.OpenDir(pealDir(notes), false)
	if err != nil {
		return RunNote{}, false
	}
	defer d.Close()
	n, ok := readRunNote(d)
	return n, ok && procs.Alive(n.PID)
}

func readRunNote(d *safefs.Dir) (RunNote, bool) {
	data, err := d.ReadFile(runNoteName, maxNote)
	var n RunNote
	if err != nil || json.Unmarshal(data, &n) != nil || n.PID <= 0 {
		return RunNote{}, false
	}
	return n, true
}

// NewRunNote is the note of this process's run of plan on state folder dir.
func NewRunNote(plan, dir string, now time.Time) RunNote {
	return RunNote{PID: os.Getpid(), PlanPath: plan, StateDir: dir, StartedAt: now.UTC().Format(time.RFC3339)}
}
