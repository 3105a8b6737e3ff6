package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"peal/internal/jsonobj"
	"peal/internal/safefs"
)

// The files of the state folder.
const (
	// FileName is the state file: which tasks of which plan are done.
	FileName = "state.json"
	// LockName is held by the run that works with the folder, for the whole
	// run; read-only commands never take it.
	LockName = "state.lock"
	// SummaryName is the run summary's name when it lives in the state
	// folder (the default run_summary_path).
	SummaryName = "run_summary.json"
)

// maxStateFile caps what is read of state.json: far more than any plan's
// progress, far less than a planted /dev/zero would fill memory with.
const maxStateFile = 64 << 20

// otherPlans is the member of state.json that keeps the progress of plans
// other than the one of the latest run.
const otherPlans = "other_plans"

// ErrStateLocked is matched (errors.Is) by the error of Open when another
// run holds the state folder.
var ErrStateLocked = errors.New("state folder in use")

// lockedError is the message for ErrStateLocked.
type lockedError struct{ msg string }

func (e *lockedError) Error() string        { return e.msg }
func (e *lockedError) Is(target error) bool { return target == ErrStateLocked }

// Plan names the plan and repository a state belongs to.
type Plan struct {
	Path, Repo string // absolute
	// Base is the folder that relative paths found in state.json are taken
	// from ("" means the working folder): Peal wrote the paths of its command
	// line as they were given.
	Base string
}

// State is the progress of one plan: the top level of state.json, and each
// entry of other_plans.
type State struct {
	PlanPath             string `json:"plan_path"`
	RepoPath             string `json:"repo_path"`
	CompletedTaskIndices []int  `json:"completed_task_indices"`
	// DeferredTaskIndices are tasks left with findings under
	// on_findings_remaining = "defer"; the next run tries them again.
	DeferredTaskIndices []int `json:"deferred_task_indices,omitempty"`
	// Tasks are the plan's tasks, each known by its text, as its last run
	// read them (see tasks.go); nil in a state written without them.
	Tasks []TaskEntry `json:"tasks,omitempty"`
	// Earlier are tasks of texts the plan no longer holds that were
	// completed or deferred, latest first: an edit undone takes them back.
	Earlier []TaskEntry `json:"earlier_tasks,omitempty"`
	// tasksProblem says why a member "tasks" that is there was not used.
	tasksProblem string
}

// Store is the state of one run's plan, held under the state folder's lock
// from Open to Close.
type Store struct {
	mu     sync.Mutex // completions of concurrent tasks must not lose one another
	dir    *safefs.Dir
	lock   *safefs.Lock
	entry  *jsonobj.Object   // this plan's members as read, unknown ones included
	others []json.RawMessage // other_plans, as read
	state  State
	saved  []byte // the file's text as last read or written
	// plan is the store's; fresh: the file held no progress of it (Align
	// looks for it under the path the plan had before it moved).
	plan  Plan
	fresh bool
}

// Open locks the state folder dir for a run of plan and loads its progress.
// It creates the folder, fails at once when another run holds it (an error
// wrapping ErrStateLocked) or when it cannot be written to, and removes the
// temporary files of a save that a killed run left. A missing file, or one
// without this plan, gives a fresh state; an unreadable file is kept aside
// and the returned warnings say so. Open writes nothing else.
func Open(dir string, plan Plan, now time.Time) (*Store, []string, error) {
	d, err := safefs.OpenDir(dir, true)
	if err != nil {
		return nil, nil, folderError(dir, err)
	}
	s := &Store{dir: d}
	if err := s.take(); err != nil {
		if s.lock != nil { // take got the lock before failing
			s.lock.Close()
		}
		d.Close()
		return nil, nil, err
	}
	warnings, err := s.load(plan, now)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return s, warnings, nil
}

// take locks the folder, checks that it can be written to and clears what a
// killed save left.
func (s *Store) take() error {
	d := s.dir
	lock, err := d.Lock(LockName)
	if errors.Is(err, safefs.ErrLocked) {
		return &lockedError{fmt.Sprintf("state folder %s is in use by another peal run (it holds %s): wait for that run to end, or give this run its own state folder (state_dir, --state-dir)",
			d.Path(), d.Join(LockName))}
	}
	if err == nil {
		s.lock = lock
		err = d.CheckWritable()
	}
	if err == nil {
		_, err = d.RemoveTemps(FileName, SummaryName, safefs.WriteCheck)
	}
	var nr *safefs.NotRegularError
	var full *safefs.FullError
	switch {
	case errors.As(err, &full):
		return full
	case errors.As(err, &nr):
		return fmt.Errorf("%w: peal does not follow links or use special files in its state folder; remove it, or choose another state folder (state_dir, --state-dir)", err)
	case err != nil:
		return fmt.Errorf("state folder %s cannot be written to (%w): fix its permissions, or choose another state folder (state_dir, --state-dir)", d.Path(), cause(err))
	}
	return nil
}

// folderError says why a state folder cannot be opened.
func folderError(dir string, err error) error {
	var nr *safefs.NotRegularError
	if errors.As(err, &nr) {
		return fmt.Errorf("state folder %s is not a folder: choose another state folder (state_dir, --state-dir)", dir)
	}
	return fmt.Errorf("state folder %s cannot be used (%w): fix it, or choose another state folder (state_dir, --state-dir)", dir, cause(err))
}

// cause is the innermost error, e.g. "permission denied" for a *PathError
// whose path the message already names.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// load reads state.json and picks this plan's progress.
func (s *Store) load(plan Plan, now time.Time) ([]string, error) {
	f, problem, err := readStateFile(s.dir)
	if err != nil {
		return nil, err
	}
	var warnings []string
	if problem != "" {
		aside, err := s.dir.KeepUnreadable(FileName, now)
		if err == nil {
			err = s.dir.Sync()
		}
		if err != nil {
			return nil, fmt.Errorf("state file %s is unreadable (%s) and cannot be moved aside: %w", s.dir.Join(FileName), problem, err)
		}
		warnings = append(warnings, fmt.Sprintf("state file %s is unreadable (%s): kept it as %s and started fresh", s.dir.Join(FileName), problem, aside))
		f = stateFile{}
	} else {
		s.saved = f.data
	}
	s.entry, s.others, warnings = f.pick(plan, warnings, s.dir.Join(FileName))
	s.state = mustEntry(s.entry)
	s.plan, s.fresh = plan, !f.has(plan)
	return warnings, nil
}

// Peek reads the state a run of plan would start from, tied to the plan's
// tasks as they are now (every task of the plan; see State.Align; nil:
// the progress as read, in the numbers of the plan's last run), without
// locking or changing anything (for dry runs and status).
func Peek(dir string, plan Plan, now []TaskText) (State, Changes, []string, error) {
	d, err := safefs.OpenDir(dir, false)
	if errors.Is(err, fs.ErrNotExist) {
		if now == nil {
			return mustEntry(freshEntry(plan)), Changes{}, nil, nil
		}
		st, ch := mustEntry(freshEntry(plan)).Align(now)
		return st, ch, nil, nil
	}
	if err != nil {
		return State{}, Changes{}, nil, folderError(dir, err)
	}
	defer d.Close()
	f, problem, err := readStateFile(d)
	if err != nil {
		return State{}, Changes{}, nil, err
	}
	var warnings []string
	if problem != "" {
		warnings = append(warnings, fmt.Sprintf("state file %s is unreadable (%s): a run would keep it aside and start fresh", d.Join(FileName), problem))
		f = stateFile{}
	}
	entry, others, warnings := f.pick(plan, warnings, d.Join(FileName))
	from := ""
	if !f.has(plan) {
		if o, _, was := moved(others, plan, now); o != nil {
			entry, from = o, was
		}
	}
	if now == nil {
		return mustEntry(entry), Changes{}, warnings, nil
	}
	st, ch := mustEntry(entry).Align(now)
	ch.MovedFrom = from
	return st, ch, warnings, nil
}

// stateFile is state.json as read: the top level (the latest run's plan) and
// the other plans.
type stateFile struct {
	data   []byte
	top    *jsonobj.Object // nil: no file
	others []json.RawMessage
}

// readStateFile reads state.json. A file that is missing gives an empty
// stateFile; one that cannot be used gives problem, saying why; a special
// file where state.json should be, or a read error, is an error.
func readStateFile(d *safefs.Dir) (f stateFile, problem string, err error) {
	data, err := d.ReadFile(FileName, maxStateFile)
	var nr *safefs.NotRegularError
	var tl *safefs.TooLargeError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return stateFile{}, "", nil
	case errors.As(err, &nr):
		return stateFile{}, "", fmt.Errorf("state file %s is %s, not a regular file: peal neither reads it nor writes through it; remove it, or choose another state folder (state_dir, --state-dir)", nr.Path, nr.Kind)
	case errors.As(err, &tl):
		return stateFile{}, fmt.Sprintf("it is larger than %d MiB", tl.Limit>>20), nil
	case err != nil:
		return stateFile{}, "", fmt.Errorf("state file %s cannot be read: %w", d.Join(FileName), cause(err))
	}
	o, err := jsonobj.Parse(data)
	if err != nil {
		return stateFile{}, jsonobj.Problem(data, err), nil
	}
	f = stateFile{data: data, top: o.Clone()}
	f.top.Delete(otherPlans)
	if raw, ok := o.Get(otherPlans); ok && !jsonobj.IsNull(raw) {
		if json.Unmarshal(raw, &f.others) != nil {
			return stateFile{}, "its other_plans is not a list", nil
		}
	}
	if _, problem := readEntry(f.top); problem != "" {
		return stateFile{}, problem, nil
	}
	return f, "", nil
}

// pick returns the entry of plan (the top level when it is this plan's, an
// entry of other_plans, or a fresh one) and the other plans after the swap:
// the top level, when it belongs to another plan, becomes the first of them.
func (f stateFile) pick(plan Plan, warnings []string, path string) (*jsonobj.Object, []json.RawMessage, []string) {
	if f.top == nil {
		return freshEntry(plan), nil, warnings
	}
	if st, _ := readEntry(f.top); plan.matches(st) {
		return f.top, f.others, warnings
	}
	others := []json.RawMessage{f.top.Compact()}
	var found *jsonobj.Object
	for i, raw := range f.others {
		o, err := jsonobj.Parse(raw)
		var st State
		problem := ""
		if err == nil {
			st, problem = readEntry(o)
		}
		if err != nil || problem != "" {
			// Kept as it is: it may be a newer peal's, and it is no one's
			// to drop.
			warnings = append(warnings, fmt.Sprintf("state file %s: entry %d of other_plans is not understood (%s); it is kept as it is", path, i+1, entryProblem(raw, err, problem)))
		} else if found == nil && plan.matches(st) {
			found = o
			continue
		}
		others = append(others, raw)
	}
	if found == nil {
		found = freshEntry(plan)
	}
	return found, others, warnings
}

func entryProblem(raw []byte, err error, problem string) string {
	if err != nil {
		return jsonobj.Problem(raw, err)
	}
	return problem
}

func freshEntry(plan Plan) *jsonobj.Object {
	o := &jsonobj.Object{}
	o.Set("plan_path", plan.Path)
	o.Set("repo_path", plan.Repo)
	o.Set("completed_task_indices", []int{})
	return o
}

// readEntry reads the members peal uses of one plan's progress; problem says
// what is wrong with them.
func readEntry(o *jsonobj.Object) (st State, problem string) {
	var k jsonobj.Kind
	if st.PlanPath, k = jsonobj.StringOf(o, "plan_path"); k != jsonobj.OK {
		return st, memberProblem("plan_path", k, "a string")
	}
	if st.RepoPath, k = jsonobj.StringOf(o, "repo_path"); k != jsonobj.OK {
		return st, memberProblem("repo_path", k, "a string")
	}
	if st.CompletedTaskIndices, k = indicesOf(o, "completed_task_indices"); k != jsonobj.OK {
		return st, memberProblem("completed_task_indices", k, "a list of task numbers")
	}
	if st.DeferredTaskIndices, k = indicesOf(o, "deferred_task_indices"); k == jsonobj.Wrong {
		return st, memberProblem("deferred_task_indices", k, "a list of task numbers")
	}
	if raw, ok := o.Get("tasks"); ok && !jsonobj.IsNull(raw) {
		st.Tasks, st.tasksProblem = tasksOf(raw)
	}
	if raw, ok := o.Get("earlier_tasks"); ok && st.Tasks != nil {
		st.Earlier = earlierOf(raw)
	}
	return st, ""
}

// mustEntry reads an entry already checked by readEntry.
func mustEntry(o *jsonobj.Object) State {
	st, _ := readEntry(o)
	return st
}

func memberProblem(name string, k jsonobj.Kind, want string) string {
	switch k {
	case jsonobj.Missing:
		return "it has no " + name
	case jsonobj.Null:
		return name + " is null, not " + want
	}
	return name + " is not " + want
}

// indicesOf reads a list of task numbers, sorted and without repeats.
func indicesOf(o *jsonobj.Object, key string) ([]int, jsonobj.Kind) {
	items, k := jsonobj.ArrayOf(o, key)
	if k != jsonobj.OK {
		return nil, k
	}
	out := make([]int, 0, len(items))
	for _, it := range items {
		n, ok := jsonobj.WholeNumber(it)
		if !ok || n < 0 {
			return nil, jsonobj.Wrong
		}
		out = append(out, n)
	}
	return normalize(out), jsonobj.OK
}

// matches reports whether a state's paths name plan's plan and repository.
func (p Plan) matches(st State) bool {
	return safefs.Same(p.resolve(st.PlanPath), p.Path) && safefs.Same(p.resolve(st.RepoPath), p.Repo)
}

func (p Plan) resolve(path string) string {
	if path == "" || filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	base := p.Base
	if base == "" {
		base, _ = os.Getwd()
	}
	return filepath.Join(base, path)
}

// Path is the state file's path.
func (s *Store) Path() string { return s.dir.Join(FileName) }

// Completed reports whether task i is recorded as completed.
func (s *Store) Completed(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, found := slices.BinarySearch(s.state.CompletedTaskIndices, i)
	return found
}

// Align ties the progress read to the plan's tasks as they are now (every
// task of the plan; see State.Align) and returns what changed since its
// last run. From then on the store's task numbers are those of now, and a
// save writes the tasks' texts. It writes nothing itself.
func (s *Store) Align(now []TaskText) Changes {
	s.mu.Lock()
	defer s.mu.Unlock()
	from := ""
	if s.fresh {
		if o, rest, was := moved(s.others, s.plan, now); o != nil {
			s.entry, s.others, s.state, from = o, rest, mustEntry(o), was
			s.fresh = false
		}
	}
	st, ch := s.state.Align(now)
	s.state, ch.MovedFrom = st, from
	return ch
}

// Complete records task i as completed and saves the file durably.
func (s *Store) Complete(i int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state.CompletedTaskIndices = normalize(append(s.state.CompletedTaskIndices, i))
	s.state.DeferredTaskIndices = slices.DeleteFunc(s.state.DeferredTaskIndices, func(d int) bool { return d == i })
	s.state.mark(i, taskCompleted)
	return s.save()
}

// Defer records task i as deferred and saves the file.
func (s *Store) Defer(i int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state.DeferredTaskIndices = normalize(append(s.state.DeferredTaskIndices, i))
	s.state.mark(i, taskDeferred)
	return s.save()
}

// Ticket is task i's part of its ticket id (State.Ticket).
func (s *Store) Ticket(i int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.Ticket(i)
}

// Snapshot returns a copy of the state.
func (s *Store) Snapshot() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state
	st.CompletedTaskIndices = slices.Clone(st.CompletedTaskIndices)
	st.DeferredTaskIndices = slices.Clone(st.DeferredTaskIndices)
	st.Tasks, st.Earlier = slices.Clone(st.Tasks), slices.Clone(st.Earlier)
	return st
}

// Save writes the state file, unless it already says what it would say.
func (s *Store) Save() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.save()
}

// Close releases the state folder's lock; the store cannot save any more.
// Closing twice is harmless.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return nil
	}
	err := s.lock.Close()
	s.dir.Close()
	s.lock = nil
	return err
}

func (s *Store) save() error {
	if s.lock == nil {
		return fmt.Errorf("saving state %s: the store is closed", s.dir.Join(FileName))
	}
	out := s.entry.Clone()
	out.Set("completed_task_indices", nonNil(s.state.CompletedTaskIndices))
	if len(s.state.DeferredTaskIndices) > 0 {
		out.Set("deferred_task_indices", s.state.DeferredTaskIndices)
	} else {
		out.Delete("deferred_task_indices")
	}
	if s.state.Tasks != nil {
		out.Set("tasks", s.state.Tasks)
		out.Delete("earlier_tasks")
		if len(s.state.Earlier) > 0 {
			out.Set("earlier_tasks", s.state.Earlier)
		}
	}
	out.Delete(otherPlans)
	if len(s.others) > 0 {
		out.SetRaw(otherPlans, jsonobj.Array(s.others))
	}
	data := out.File()
	if bytes.Equal(data, s.saved) {
		return nil
	}
	err := s.dir.WriteFile(FileName, data)
	if err == nil {
		err = s.dir.Sync()
	}
	if err != nil {
		return fmt.Errorf("saving state %s: %w", s.dir.Join(FileName), err)
	}
	s.saved = data
	return nil
}

func nonNil(xs []int) []int {
	if xs == nil {
		return []int{}
	}
	return xs
}

func normalize(xs []int) []int {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

// RunSummary is written at the end of a run that exits 0 or 2.
type RunSummary struct {
	// TasksCompleted are the tasks this run completed;
	// TasksAlreadyCompleted the selected tasks earlier runs had completed.
	TasksCompleted             []int `json:"tasks_completed"`
	TasksAlreadyCompleted      []int `json:"tasks_already_completed"`
	TasksFailed                []int `json:"tasks_failed"`
	TasksWithRemainingFindings []int `json:"tasks_with_remaining_findings"`
	TasksSkipped               []int `json:"tasks_skipped"`
	TasksDeferred              []int `json:"tasks_deferred"`
	// TasksReviewSkipped completed without Phase 3: on_stet_fail = skip
	// let them go on when their review could not start or failed.
	TasksReviewSkipped []int  `json:"tasks_review_skipped"`
	ExitCode           int    `json:"exit_code"`
	PlanPath           string `json:"plan_path"`
	RepoPath           string `json:"repo_path"`
	CompletedAt        string `json:"completed_at"`
	// Usage is present when agent calls reported tokens or cost
	// (structured_output).
	Usage *RunUsage `json:"usage,omitempty"`
	// ParallelTasks are the tasks that ran in worktrees of their own
	// (parallel_isolation = worktree), in index order.
	ParallelTasks []ParallelTask `json:"parallel_tasks,omitempty"`
	// TasksChecksFailed are the tasks whose checks still failed after
	// their last address round, and ChecksFailing the checks that fail on
	// the tree the run leaves (check_commands; absent without checks).
	TasksChecksFailed []int    `json:"tasks_checks_failed,omitzero"`
	ChecksFailing     []string `json:"checks_failing,omitzero"`
	// Kept is what the run kept for the user: the work of tasks that did
	// not complete (never on the user's branch), the files of the user's a
	// task removed or replaced, each with the commands that take it back.
	Kept []Kept `json:"kept,omitzero"`
}

// ParallelTask is how a task of a parallel block that ran in a worktree of
// its own ended: where it ran, whether its work was merged into the work
// tree, and otherwise the branch that keeps it and why its merge failed.
type ParallelTask struct {
	Task     int    `json:"task"`
	Worktree string `json:"worktree"`
	Branch   string `json:"branch"`
	Merged   bool   `json:"merged"`
	Conflict
}

// Conflict is why the merge of a task's work into the work tree was
// undone, one shape for every kind of conflict: the files both sides
// changed (git could not merge them), what git said when no file
// conflicted (git refused the merge before starting it, or a hook refused
// its commit), or the checks the merged tree failed.
type Conflict struct {
	Files  []string `json:"conflict_files,omitempty"`
	Detail string   `json:"conflict_detail,omitempty"`
	Checks []string `json:"conflict_checks,omitempty"`
}

// Usage is the tokens and cost that agent calls reported: InputTokens
// count every token of the prompts, CachedTokens the part of them read from
// the provider's cache. Requests, BytesSent and BytesReceived are what
// peal's model endpoint forwarded for them (whose count of tokens, the
// API's own, is then the one kept).
type Usage struct {
	InputTokens   int64   `json:"input_tokens"`
	OutputTokens  int64   `json:"output_tokens"`
	CachedTokens  int64   `json:"cached_tokens,omitempty"`
	CostUSD       float64 `json:"cost_usd"`
	Requests      int64   `json:"requests,omitempty"`
	BytesSent     int64   `json:"bytes_sent,omitempty"`
	BytesReceived int64   `json:"bytes_received,omitempty"`
}

// RunUsage is a run's usage in all and per task.
type RunUsage struct {
	Usage
	Tasks map[int]Usage `json:"tasks"`
}

// maxSummaryFile caps what is read of a run summary.
const maxSummaryFile = 16 << 20

// ReadRunSummary reads a run summary; ok is false when there is none that
// can be read.
func ReadRunSummary(path string) (sum RunSummary, ok bool) {
	data, err := safefs.ReadFile(path, maxSummaryFile)
	if err != nil || json.Unmarshal(data, &sum) != nil {
		return RunSummary{}, false
	}
	return sum, true
}

// WriteJSONAtomic writes v as indented JSON to path, atomically and durably
// (see safefs.WriteFile).
func WriteJSONAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return safefs.WriteFile(path, append(data, '\n'))
}
