package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// FileName is the name of the state file inside the state folder.
const FileName = "state.json"

// State is the content of state.json.
type State struct {
	PlanPath             string `json:"plan_path"`
	RepoPath             string `json:"repo_path"`
	CompletedTaskIndices []int  `json:"completed_task_indices"`
	// DeferredTaskIndices are tasks left with findings under
	// on_findings_remaining = "defer"; the next run tries them again.
	DeferredTaskIndices []int `json:"deferred_task_indices,omitempty"`
}

// Store is the state of one run and the file it is saved to.
type Store struct {
	mu    sync.Mutex // completions of concurrent tasks must not lose one another
	path  string
	state State
}

// Open loads the state file in dir for a run of plan on repo. A missing file,
// a file for another plan or repo, or an unreadable file gives a fresh state;
// the returned warnings say why, and an unreadable file is kept aside. Open
// writes nothing unless it has to move an unreadable file.
func Open(dir, plan, repo string, now time.Time) (*Store, []string, error) {
	s := &Store{path: filepath.Join(dir, FileName), state: State{PlanPath: plan, RepoPath: repo, CompletedTaskIndices: []int{}}}
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("state file %s: %w", s.path, err)
	}
	var loaded State
	if err := json.Unmarshal(data, &loaded); err != nil || loaded.CompletedTaskIndices == nil {
		aside, rerr := KeepAside(s.path, now)
		if rerr != nil {
			return nil, nil, fmt.Errorf("state file %s is unreadable and cannot be moved aside: %w", s.path, rerr)
		}
		reason := "it has no completed_task_indices"
		if err != nil {
			reason = err.Error()
		}
		return s, []string{fmt.Sprintf("state file %s is unreadable (%s): kept it as %s and started fresh", s.path, reason, aside)}, nil
	}
	if loaded.PlanPath != plan || loaded.RepoPath != repo {
		return s, []string{fmt.Sprintf("state file %s belongs to plan %s in %s, not to this run: starting fresh", s.path, loaded.PlanPath, loaded.RepoPath)}, nil
	}
	s.state.CompletedTaskIndices = normalize(loaded.CompletedTaskIndices)
	if len(loaded.DeferredTaskIndices) > 0 {
		s.state.DeferredTaskIndices = normalize(loaded.DeferredTaskIndices)
	}
	return s, nil, nil
}

// Path is the state file's path.
func (s *Store) Path() string { return s.path }

// Completed reports whether task i is recorded as completed.
func (s *Store) Completed(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, found := slices.BinarySearch(s.state.CompletedTaskIndices, i)
	return found
}

// Complete records task i as completed and saves the file.
func (s *Store) Complete(i int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state.CompletedTaskIndices = normalize(append(s.state.CompletedTaskIndices, i))
	s.state.DeferredTaskIndices = slices.DeleteFunc(s.state.DeferredTaskIndices, func(d int) bool { return d == i })
	return s.save()
}

// Defer records task i as deferred and saves the file.
func (s *Store) Defer(i int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state.DeferredTaskIndices = normalize(append(s.state.DeferredTaskIndices, i))
	return s.save()
}

// Snapshot returns a copy of the state.
func (s *Store) Snapshot() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state
	st.CompletedTaskIndices = slices.Clone(st.CompletedTaskIndices)
	st.DeferredTaskIndices = slices.Clone(st.DeferredTaskIndices)
	return st
}

// Save writes the state file atomically.
func (s *Store) Save() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.save()
}

func (s *Store) save() error {
	if err := WriteJSONAtomic(s.path, s.state); err != nil {
		return fmt.Errorf("saving state %s: %w", s.path, err)
	}
	return nil
}

func normalize(xs []int) []int {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

// RunSummary is written at the end of a run that exits 0 or 2.
type RunSummary struct {
	TasksCompleted             []int  `json:"tasks_completed"`
	TasksFailed                []int  `json:"tasks_failed"`
	TasksWithRemainingFindings []int  `json:"tasks_with_remaining_findings"`
	TasksSkipped               []int  `json:"tasks_skipped"`
	TasksDeferred              []int  `json:"tasks_deferred"`
	ExitCode                   int    `json:"exit_code"`
	PlanPath                   string `json:"plan_path"`
	RepoPath                   string `json:"repo_path"`
	CompletedAt                string `json:"completed_at"`
}
