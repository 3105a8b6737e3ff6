package agentcall

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"peal/agent"
	"peal/internal/safefs"
	"peal/phase"
	"peal/state"
)

// With agent_session = "task", a task's plan, execute and address calls
// continue one conversation per agent of the run (the primary, the
// fallback: each its own), so that a later call does not explore again what
// an earlier one read. Triage and normalize calls always start fresh:
// triage judges the review's findings as a reader without a stake in the
// work, from the findings alone, and a normalize call belongs to no task.
//
// A session is named only by its id, kept per task in the state folder
// (state.Sessions) with the agent kind and the folder its calls ran in:
// ids never cross tasks, and a task that runs in another folder begins
// anew. What the next attempt of a call does after a failure:
//
//   - a resumed call the CLI could not resume (its words for it, the kind's
//     Session.Lost), or one refused for a conversation over the model's
//     context window: a fresh session, at once, without spending a retry
//     (phase.Verdict.Again);
//   - a first call that failed, of a CLI whose ids peal chooses: a new id
//     (the CLI refuses an id twice, or holds it dead);
//   - any other failure once the session exists (a timeout, an outage, a
//     rate limit, a wrong answer): the session is continued.
//
// A task that completes, or whose address loop ended on a plateau, drops
// its sessions: whatever runs it next begins afresh. A task whose work was
// kept on a branch and the tree put back keeps them, marked (PutBack): the
// next call that continues one is first told that its earlier work is
// gone (prompt.PutBack), until a call of it succeeds.

// Sessions are what a run knows of its tasks' agent sessions.
type Sessions struct {
	on    bool
	log   *slog.Logger
	now   func() time.Time
	store *state.Sessions // nil: not kept on disk (before the state folder is held, or when it cannot be)

	mu   sync.Mutex
	live map[sessionKey]*liveSession
}

// sessionKey names one task's conversation with one agent of the run.
type sessionKey struct {
	task int
	role phase.Role
}

// liveSession is a session as the run knows it: its id, the CLI and folder
// it belongs to, and whether the next call resumes it (false while the
// first call of a session whose id peal chose has not succeeded).
type liveSession struct {
	id, kind, dir string
	began         time.Time
	resume        bool
	// count is the session's usage so far, for a CLI whose events count
	// the whole session.
	count *agent.Usage
	// putBack: the work the conversation did is no longer in the tree
	// (state.Session.PutBack).
	putBack bool
}

// NewSessions are the sessions of a run: none unless on (agent_session =
// "task").
func NewSessions(on bool, log *slog.Logger, now func() time.Time) *Sessions {
	return &Sessions{on: on, log: log, now: now, live: map[sessionKey]*liveSession{}}
}

// Open reads the sessions kept in the state folder, which the run holds,
// and drops those of tasks an earlier run completed. A folder where they
// cannot be kept is a warning: the run's sessions then last only as long
// as the run.
func (b *Sessions) Open(stateDir string, plan state.Plan, completed func(int) bool) {
	if !b.on {
		return
	}
	store, warnings, err := state.OpenSessions(stateDir, plan, b.now())
	for _, w := range warnings {
		b.log.Warn(w)
	}
	if err != nil {
		b.log.Warn("the agent sessions cannot be kept in the state folder: a run stopped now will not continue them", "err", err)
		return
	}
	if err := store.DropIf(completed); err != nil {
		b.log.Warn("could not drop the agent sessions of completed tasks", "err", err)
	}
	b.mu.Lock()
	b.store = store
	b.mu.Unlock()
}

// Renumber follows the plan's tasks to their numbers now (now:
// state.Changes.Now), before any call: a task's sessions go with its text,
// and those of a task no longer in the plan are dropped.
func (b *Sessions) Renumber(now func(was int) (int, bool)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.store.Renumber(now); err != nil {
		b.log.Warn("could not renumber the agent sessions of the plan's tasks", "err", err)
	}
}

// PutBack notes that the work of tasks was kept on a branch and the tree
// put back as it was before them: the next call that continues one of
// their sessions is told so first.
func (b *Sessions) PutBack(tasks ...int) {
	if !b.on {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, task := range tasks {
		for k, ls := range b.live {
			if k.task == task {
				ls.putBack = true
			}
		}
		if err := b.store.MarkPutBack(task, true); err != nil {
			b.log.Warn("could not note in the state folder that a task's work was put back", "task", task, "err", err)
		}
	}
}

// Close lets go of the sessions file.
func (b *Sessions) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.store.Close()
	b.store = nil
}

// TaskEnded drops a task's sessions when they are done with: the task
// completed, or its address loop ended on a plateau (a conversation that
// stopped making progress is not continued).
func (b *Sessions) TaskEnded(task int, completed, plateau bool) {
	if !b.on || !(completed || plateau) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.live {
		if k.task == task {
			delete(b.live, k)
		}
	}
	if err := b.store.Drop(task, ""); err != nil {
		b.log.Warn("could not drop the agent sessions of a task", "task", task, "err", err)
	}
	if plateau && !completed {
		b.log.Info("the task's address loop ended on a plateau: its next run begins fresh agent sessions", "task", task)
	}
}

// callSession is one agent call's part in its task's session with one
// agent: which session each attempt begins or continues, and what an
// attempt's end does to it.
type callSession struct {
	book *Sessions
	key  sessionKey
	kind *agent.Kind
	dir  string
	log  *slog.Logger

	// The attempt under way: the session it began or continued ("" for a
	// first call of a CLI that chooses the id, until its events name it),
	// and whether it resumed it.
	id      string
	resumed bool
}

// call is the session part of an agent call of the given phase for task,
// made by side s in dir; nil when the call continues no session (fresh
// sessions, a call of no task, triage and normalize, a CLI that cannot).
func (b *Sessions) call(task int, name phase.Name, s *side, dir string, log *slog.Logger) *callSession {
	if !b.on || task == phase.NoTask || s.kind.Session == nil {
		return nil
	}
	switch name {
	case phase.Plan, phase.Execute, phase.Address:
	default:
		return nil
	}
	return &callSession{book: b, key: sessionKey{task, s.role}, kind: s.kind, dir: dir, log: log.With("role", s.role)}
}

// current is the task's session with the agent, as this run knows it or,
// the first time, as the state folder kept it; nil when there is none it
// may continue. A session of another CLI, another folder or with an id the
// CLI could misread is dropped, and the task begins a fresh one. The caller
// holds b.mu.
func (c *callSession) current() *liveSession {
	b := c.book
	ls, known := b.live[c.key]
	if !known {
		if kept, ok := b.store.Get(c.key.task, string(c.key.role)); ok {
			ls = &liveSession{id: kept.ID, kind: kept.Kind, dir: kept.Dir, began: kept.Began, resume: true, putBack: kept.PutBack}
			if kept.Count != nil {
				u := agent.Usage{InputTokens: kept.Count.InputTokens, OutputTokens: kept.Count.OutputTokens, CachedTokens: kept.Count.CachedTokens, CostUSD: kept.Count.CostUSD}
				ls.count = &u
			}
			b.live[c.key] = ls
		}
	}
	if ls == nil {
		return nil
	}
	why := ""
	switch {
	case ls.kind != c.kind.Name:
		why = fmt.Sprintf("it is a session of the %s CLI, and this agent is the %s CLI", ls.kind, c.kind.Name)
	case !safefs.Same(ls.dir, c.dir):
		why = fmt.Sprintf("it was made in %s, and the task now works in %s", ls.dir, c.dir)
	case !c.kind.Session.ValidID(ls.id):
		why = fmt.Sprintf("its id %q is not one the %s CLI gives or takes", ls.id, c.kind.Name)
	}
	if why != "" {
		c.log.Info("the task's agent session is not continued: a fresh one begins", "task", c.key.task, "session", ls.id, "why", why)
		c.forget()
		return nil
	}
	return ls
}

// forget drops the session, in the run and in the state folder; the
// caller holds b.mu.
func (c *callSession) forget() {
	delete(c.book.live, c.key)
	if err := c.book.store.Drop(c.key.task, string(c.key.role)); err != nil {
		c.log.Warn("could not drop an agent session from the state folder", "task", c.key.task, "err", err)
	}
}

// keep writes the session to the state folder; the caller holds b.mu. A
// write that fails is a warning: the session goes on for this run.
func (c *callSession) keep(ls *liveSession) {
	x := state.Session{Task: c.key.task, Role: string(c.key.role), Kind: ls.kind, ID: ls.id, Dir: ls.dir, Began: ls.began.UTC(), PutBack: ls.putBack}
	if ls.count != nil {
		x.Count = &state.Usage{InputTokens: ls.count.InputTokens, OutputTokens: ls.count.OutputTokens, CachedTokens: ls.count.CachedTokens, CostUSD: ls.count.CostUSD}
	}
	if err := c.book.store.Put(x); err != nil {
		c.log.Warn("could not keep the agent session in the state folder: a run stopped now begins it anew", "task", c.key.task, "err", err)
	}
}

// begin is the session of the next attempt: the one to resume, or a new id
// (a CLI whose ids peal chooses), or none yet (a CLI that chooses the id);
// putBack says that the session to resume did work that is no longer in
// the tree. A new id is kept at once, so that a run killed during the call
// continues that session.
func (c *callSession) begin() (id string, resume, putBack bool) {
	b := c.book
	b.mu.Lock()
	defer b.mu.Unlock()
	c.id, c.resumed = "", false
	if ls := c.current(); ls != nil && ls.resume {
		c.id, c.resumed = ls.id, true
		return ls.id, true, ls.putBack
	}
	if !c.kind.Session.Chosen {
		return "", false, false
	}
	ls := &liveSession{id: agent.NewID(), kind: c.kind.Name, dir: c.dir, began: b.now()}
	b.live[c.key] = ls
	c.keep(ls)
	c.id = ls.id
	return ls.id, false, false
}

// named hears of the session id the attempt's events named first. A CLI
// that chooses the id names the session it began; one that continued
// another session than the one it was asked to has begun a new one, which
// is the task's from then on. An id the CLI could misread is not kept.
func (c *callSession) named(id string) {
	b := c.book
	b.mu.Lock()
	defer b.mu.Unlock()
	if id == c.id || c.kind.Session.Chosen {
		return
	}
	if !c.kind.Session.ValidID(id) {
		c.log.Warn("the agent's events name a session id it would not take back: the task's next call begins a fresh session", "task", c.key.task, "session", id)
		return
	}
	if c.resumed {
		c.log.Warn("the agent began another session than the one it was asked to continue: the task continues the new one", "task", c.key.task,
			"asked", c.id, "session", id)
	}
	ls := &liveSession{id: id, kind: c.kind.Name, dir: c.dir, began: b.now()}
	b.live[c.key] = ls
	c.id, c.resumed = id, false
	c.keep(ls)
}

// attempt is how an attempt stood to its session, for the run record.
func (c *callSession) attempt() (how, id string) {
	if c == nil {
		return "", ""
	}
	c.book.mu.Lock()
	defer c.book.mu.Unlock()
	switch {
	case c.id == "":
		return "", ""
	case c.resumed:
		return state.SessionContinued, c.id
	}
	return state.SessionBegan, c.id
}

// usage is the attempt's own usage from what its events counted: for a
// CLI that counts the whole session, the difference from the session's
// count before the attempt (none before a session's first call), which
// becomes the session's count.
func (c *callSession) usage(counted agent.Usage) agent.Usage {
	if c == nil || c.kind.Events == nil || !c.kind.Events.Cumulative {
		return counted
	}
	b := c.book
	b.mu.Lock()
	defer b.mu.Unlock()
	ls := b.live[c.key]
	if ls == nil || ls.id != c.id || c.id == "" {
		return counted
	}
	own := counted
	if c.resumed && ls.count != nil {
		own = counted.Since(*ls.count)
	}
	if counted != (agent.Usage{}) {
		ls.count = &counted
		c.keep(ls)
	}
	return own
}

// ended applies how an attempt ended to the session and returns the
// verdict the retry loop acts on: a resume the CLI could not make, or a
// conversation over the model's context window, is followed at once by a
// fresh session (Verdict.Again), said in one line; a first call that
// failed gives up its id when peal chose it; any other attempt leaves the
// session to continue.
func (c *callSession) ended(res phase.Result, v phase.Verdict, named bool) phase.Verdict {
	b := c.book
	b.mu.Lock()
	defer b.mu.Unlock()
	ls := b.live[c.key]
	if ls == nil || ls.id != c.id || c.id == "" {
		return v // no session came of it (a CLI that names its sessions did not)
	}
	if v.Class == phase.Succeeded {
		ls.resume = true
		if ls.putBack {
			// The agent has been told: the conversation goes on as any.
			ls.putBack = false
			c.keep(ls)
		}
		return v
	}
	var window *agent.ContextWindowError
	switch {
	case c.resumed:
		if said, lost := c.kind.Session.LostIn(res, named); lost {
			c.forget()
			return again(v, &SessionLostError{Kind: c.kind.Name, Phase: res.Phase, ID: c.id, Said: said, Err: v.Err})
		}
		if errors.As(v.Err, &window) {
			c.forget()
			return again(v, &SessionTooLongError{Kind: c.kind.Name, Phase: res.Phase, ID: c.id, Said: window.Said, Err: v.Err})
		}
	case c.kind.Session.Chosen:
		// The CLI refuses an id it has seen once (Claude Code: "already
		// in use"), or holds it dead (gemini): the next attempt takes a
		// new one.
		c.forget()
	default:
		// The CLI named the session: the next attempt continues it.
		ls.resume = true
	}
	return v
}

// again makes v a failure the next attempt avoids with a fresh session.
func again(v phase.Verdict, err error) phase.Verdict {
	v.Err, v.Again, v.AgentOnly = err, true, false
	return v
}

// SessionLostError: the agent's CLI could not resume the task's session
// (the id unknown to it, its files gone, another folder); the next attempt
// begins a fresh session at once, without spending a retry.
type SessionLostError struct {
	Kind  string
	Phase phase.Name
	ID    string
	Said  string // the CLI's words, quoted
	Err   error  // the attempt's failure
}

func (e *SessionLostError) Error() string {
	return fmt.Sprintf("the %s CLI could not resume the task's session %s for the %s call, so a fresh session begins; %s says: %s", e.Kind, e.ID, e.Phase, e.Kind, e.Said)
}

func (e *SessionLostError) Unwrap() error { return e.Err }

// SessionTooLongError: the task's session has grown past the model's
// context window; the next attempt begins a fresh session at once, without
// spending a retry, before the refusal is fatal.
type SessionTooLongError struct {
	Kind  string
	Phase phase.Name
	ID    string
	Said  string // the CLI's words, quoted
	Err   error  // the attempt's failure (*agent.ContextWindowError)
}

func (e *SessionTooLongError) Error() string {
	return fmt.Sprintf("the task's %s session %s has outgrown the model's context window, so the %s call begins a fresh session; %s says: %s", e.Kind, e.ID, e.Phase, e.Kind, e.Said)
}

func (e *SessionTooLongError) Unwrap() error { return e.Err }
