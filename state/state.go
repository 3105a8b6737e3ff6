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
	s := &Store{path: filepath.Join(dir, FileName)}
	st, problem, unreadable, err := read(s.path, plan, repo)
	if err != nil {
		return nil, nil, err
	}
	s.state = st
	switch {
	case unreadable:
		aside, err := KeepAside(s.path, now)
		if err != nil {
			return nil, nil, fmt.Errorf("state file %s is unreadable and cannot be moved aside: %w", s.path, err)
		}
		return s, []string{fmt.Sprintf("state file %s is unreadable (%s): kept it as %s and started fresh", s.path, problem, aside)}, nil
	case problem != "":
		return s, []string{problem}, nil
	}
	return s, nil, nil
}

// Peek reads the state a run of plan on repo would start from, changing
// nothing on disk (for dry runs and status).
func Peek(dir, plan, repo string) (State, []string, error) {
	path := filepath.Join(dir, FileName)
	st, problem, unreadable, err := read(path, plan, repo)
	switch {
	case err != nil:
		return State{}, nil, err
	case unreadable:
		return st, []string{fmt.Sprintf("state file %s is unreadable (%s): a run would keep it aside and start fresh", path, problem)}, nil
	case problem != "":
		return st, []string{problem}, nil
	}
	return st, nil, nil
}

// read loads a state file for plan and repo: a fresh state when the file is
// missing, unreadable (unreadable set, problem says why) or another run's
// (problem says so).
func read(path, plan, repo string) (st State, problem string, unreadable bool, err error) {
	st = State{PlanPath: plan, RepoPath: repo, CompletedTaskIndices: []int{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, "", false, nil
	}
	if err != nil {
		return st, "", false, fmt.Errorf("state file %s: %w", path, err)
	}
	var loaded State
	if err := json.Unmarshal(data, &loaded); err != nil {
		return st, err.Error(), true, nil
	}
	if loaded.CompletedTaskIndices == nil {
		return st, "it has no completed_task_indices", true, nil
	}
	if loaded.PlanPath != plan || loaded.RepoPath != repo {
		return st, fmt.Sprintf("state file %s belongs to plan %s in %s, not to this run: starting fresh", path, loaded.PlanPath, loaded.RepoPath), false, nil
	}
	st.CompletedTaskIndices = normalize(loaded.CompletedTaskIndices)
	if len(loaded.DeferredTaskIndices) > 0 {
		st.DeferredTaskIndices = normalize(loaded.DeferredTaskIndices)
	}
	return st, "", false, nil
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
	// Usage is present when agent calls reported tokens or cost
	// (structured_output).
	Usage *RunUsage `json:"usage,omitempty"`
}

// Usage is the tokens and cost that agent calls reported.
type Usage struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
}

// RunUsage is a run's usage in all and per task.
type RunUsage struct {
	Usage
	Tasks map[int]Usage `json:"tasks"`
}
