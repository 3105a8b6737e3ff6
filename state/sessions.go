package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"peal/internal/jsonobj"
	"peal/internal/safefs"
)

// SessionsName is the file of the state folder that keeps the agent
// sessions of the tasks that have not completed (agent_session = "task"),
// so that a run stopped by a signal, a kill or an outage continues them.
const SessionsName = "sessions.json"

// maxSessionsFile caps what is read of the sessions file: thousands of
// sessions take a few hundred KiB.
const maxSessionsFile = 4 << 20

// Session is one task's conversation with one agent of the run.
type Session struct {
	PlanPath string `json:"plan_path"`
	RepoPath string `json:"repo_path"`
	Task     int    `json:"task"`
	// Role is the agent's: primary or fallback; each has a session of its
	// own.
	Role string `json:"role"`
	// Kind is the agent kind whose CLI holds the session, ID the session's
	// id as that CLI gave or took it.
	Kind string `json:"kind"`
	ID   string `json:"id"`
	// Dir is the folder its calls ran in: a call in another folder (a
	// task that runs again alone, in another worktree) begins anew.
	Dir   string    `json:"dir"`
	Began time.Time `json:"began"`
	// Count is the session's usage so far as its CLI last reported it, for
	// a CLI whose events count the whole session (codex): a later call's
	// own usage is the difference from it.
	Count *Usage `json:"count,omitempty"`
	// PutBack: the work the conversation did was kept on a branch and the
	// tree put back as it was before the task, since its last call. The
	// next call that continues it is told so first.
	PutBack bool `json:"put_back,omitempty"`
}

// sessionsFile is the sessions file as written.
type sessionsFile struct {
	Sessions []Session `json:"sessions"`
}

// Sessions are the agent sessions kept in a state folder, for one plan:
// read once when the run opens them, written atomically on every change.
// The caller holds the state folder's lock. Its methods are safe for
// concurrent use (the tasks of a parallel block).
type Sessions struct {
	mu   sync.Mutex
	dir  *safefs.Dir
	plan Plan
	list []Session // every plan's, in the file's order
}

// OpenSessions reads the sessions file of the state folder dir, for the
// sessions of plan. A missing file holds none; a file that cannot be read
// (not JSON, too large, not a regular file) is kept aside as
// sessions.json.corrupt-<stamp> and holds none, and a warning says so; a
// session that is not whole (no id, no task, an id that could be read as
// an option) is dropped, and a warning says so too. An error means the
// folder cannot be used.
func OpenSessions(dir string, plan Plan, now time.Time) (*Sessions, []string, error) {
	d, err := safefs.OpenDir(dir, true)
	if err != nil {
		return nil, nil, folderError(dir, err)
	}
	s := &Sessions{dir: d, plan: plan}
	if _, err := d.RemoveTemps(SessionsName); err != nil {
		d.Close()
		return nil, nil, fmt.Errorf("sessions file %s: %w", d.Join(SessionsName), err)
	}
	data, err := d.ReadFile(SessionsName, maxSessionsFile)
	var nr *safefs.NotRegularError
	var tl *safefs.TooLargeError
	problem := ""
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return s, nil, nil
	case errors.As(err, &nr):
		problem = "it is " + nr.Kind + ", not a regular file"
	case errors.As(err, &tl):
		problem = fmt.Sprintf("it is larger than %d MiB", tl.Limit>>20)
	case err != nil:
		d.Close()
		return nil, nil, fmt.Errorf("sessions file %s cannot be read: %w", d.Join(SessionsName), cause(err))
	default:
		var f sessionsFile
		if len(bytes.TrimSpace(data)) == 0 {
			problem = "it is empty"
		} else if err := json.Unmarshal(data, &f); err != nil {
			problem = jsonobj.Problem(data, err)
		} else {
			s.list = f.Sessions
		}
	}
	if problem != "" {
		aside, err := d.KeepUnreadable(SessionsName, now)
		if err == nil {
			err = d.Sync()
		}
		if err != nil {
			d.Close()
			return nil, nil, fmt.Errorf("sessions file %s is unreadable (%s) and cannot be moved aside: %w", d.Join(SessionsName), problem, err)
		}
		return s, []string{fmt.Sprintf("sessions file %s is unreadable (%s): kept it as %s; every task begins a fresh agent session", d.Join(SessionsName), problem, aside)}, nil
	}
	var warnings []string
	s.list = slices.DeleteFunc(s.list, func(x Session) bool {
		if why := x.problem(); why != "" {
			warnings = append(warnings, fmt.Sprintf("sessions file %s: a session of task %d (%s) is dropped: %s; the task begins a fresh one", d.Join(SessionsName), x.Task, x.Role, why))
			return true
		}
		return false
	})
	return s, warnings, nil
}

// problem says what keeps a session from being continued; "" when nothing
// does. What the CLI takes as an id is its kind's to say; here, an id is at
// least a short run of printable characters that cannot pass for an
// option.
func (x Session) problem() string {
	switch {
	case x.ID == "":
		return "it has no id"
	case len(x.ID) > 256 || strings.HasPrefix(x.ID, "-") || strings.ContainsFunc(x.ID, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }):
		return fmt.Sprintf("its id %q is not one a CLI gives", x.ID)
	case x.Task < 0:
		return "it names no task"
	case x.Role == "" || x.Kind == "" || x.Dir == "":
		return "it does not say which agent and folder it belongs to"
	}
	return ""
}

// mine reports whether a session belongs to the plan of these sessions.
func (s *Sessions) mine(x Session) bool {
	return s.plan.matches(State{PlanPath: x.PlanPath, RepoPath: x.RepoPath})
}

// Get returns the session of task's agent role, if one is kept.
func (s *Sessions) Get(task int, role string) (Session, bool) {
	if s == nil {
		return Session{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.list {
		if x.Task == task && x.Role == role && s.mine(x) {
			return x, true
		}
	}
	return Session{}, false
}

// Put keeps x as the session of its task's agent (x.Role), in place of the
// one kept before, and writes the file.
func (s *Sessions) Put(x Session) error {
	if s == nil {
		return nil
	}
	x.PlanPath, x.RepoPath = s.plan.Path, s.plan.Repo
	if why := x.problem(); why != "" {
		return fmt.Errorf("session of task %d (%s) not kept: %s", x.Task, x.Role, why)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.list, func(y Session) bool { return y.Task == x.Task && y.Role == x.Role && s.mine(y) })
	switch {
	case i >= 0 && sameSession(s.list[i], x):
		return nil
	case i >= 0:
		s.list[i] = x
	default:
		s.list = append(s.list, x)
	}
	return s.save()
}

// sameSession reports whether two sessions say the same.
func sameSession(a, b Session) bool {
	sameCount := a.Count == b.Count || (a.Count != nil && b.Count != nil && *a.Count == *b.Count)
	sameTime := a.Began.Equal(b.Began)
	a.Count, b.Count = nil, nil
	a.Began, b.Began = time.Time{}, time.Time{}
	return sameCount && sameTime && a == b
}

// Drop forgets the session of task's agent role (every agent's, when role
// is "") and writes the file when that changed it.
func (s *Sessions) Drop(task int, role string) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.list)
	s.list = slices.DeleteFunc(s.list, func(x Session) bool { return x.Task == task && (role == "" || x.Role == role) && s.mine(x) })
	if len(s.list) == n {
		return nil
	}
	return s.save()
}

// MarkPutBack notes on every kept session of task whether its work was
// put back (Session.PutBack), and writes the file when that changed it.
func (s *Sessions) MarkPutBack(task int, putBack bool) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for i, x := range s.list {
		if x.Task == task && s.mine(x) && x.PutBack != putBack {
			s.list[i].PutBack, changed = putBack, true
		}
	}
	if !changed {
		return nil
	}
	return s.save()
}

// DropIf forgets the sessions of this plan's tasks for which done is true
// (tasks an earlier run completed) and writes the file when that changed
// it.
func (s *Sessions) DropIf(done func(task int) bool) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.list)
	s.list = slices.DeleteFunc(s.list, func(x Session) bool { return s.mine(x) && done(x.Task) })
	if len(s.list) == n {
		return nil
	}
	return s.save()
}

// Renumber gives the sessions of this plan's tasks the numbers their tasks
// have now (now: Changes.Now) and forgets those of tasks no longer in the
// plan (their text changed, or they were removed): a conversation belongs
// to the task's text, never to the number another task took. It writes
// the file when that changed it.
func (s *Sessions) Renumber(now func(was int) (int, bool)) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	s.list = slices.DeleteFunc(s.list, func(x Session) bool {
		if !s.mine(x) {
			return false
		}
		n, ok := now(x.Task)
		changed = changed || !ok || n != x.Task
		return !ok
	})
	if !changed {
		return nil
	}
	for i, x := range s.list {
		if s.mine(x) {
			s.list[i].Task, _ = now(x.Task)
		}
	}
	return s.save()
}

// save writes the file (the caller holds mu), durably.
func (s *Sessions) save() error {
	data, err := json.MarshalIndent(sessionsFile{Sessions: nonNilSessions(s.list)}, "", "  ")
	if err == nil {
		err = s.dir.WriteFile(SessionsName, append(data, '\n'))
	}
	if err == nil {
		err = s.dir.Sync()
	}
	if err != nil {
		return fmt.Errorf("saving the agent sessions in %s: %w", s.dir.Join(SessionsName), err)
	}
	return nil
}

func nonNilSessions(list []Session) []Session {
	if list == nil {
		return []Session{}
	}
	return list
}

// Close closes the folder; the sessions cannot be saved any more.
func (s *Sessions) Close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dir.Close()
}
