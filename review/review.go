// Package review owns Phase 3 of a task: the review of its committed work by
// the stet CLI (or by custom review commands), the address loop that asks the
// agent to fix what the review found, and the review session around it, one
// per task (or per parallel block), kept in peal's state folder. It calls the
// agent through the small Agent interface and runs every stet and git
// command through the one retry loop of package phase.
package review

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"peal/check"
	"peal/config"
	"peal/confine"
	"peal/internal/gitrepo"
	"peal/internal/owndir"
	"peal/internal/safefs"
	"peal/phase"
	"peal/state"
)

// Agent runs the agent calls of Phase 3.
type Agent interface {
	// Call runs one agent call of the given phase (phase.Triage or phase.Address)
	// for task, with up to attempts attempts for ordinary failures, and
	// returns its stdout, or the typed error of package phase that ended it.
	Call(ctx context.Context, name phase.Name, task, attempts int, prompt string) (string, error)
}

// Options are what a Reviewer needs from the run.
type Options struct {
	Config *config.Config
	Agent  Agent
	// Caller builds the Spec of every stet command (folder, limits,
	// environment, observer).
	Caller phase.Caller
	Git    *gitrepo.Repo
	// Log hears of the review's calls and findings once it runs (nil:
	// Caller's log).
	Log *slog.Logger
	// LookPath finds stet on PATH; nil means config.ResolveCommand.
	LookPath func(string) (string, error)
	// Checks are the project's own checks (nil: check_commands unset),
	// run after each execute and each address round.
	Checks *check.Checks
	// Guard, when set, is asked before every stet (or custom review)
	// command: an error refuses the command (what it would run was changed
	// under the run) and ends the run.
	Guard func() error
	// Confine, when set, confines a custom review command (stet_commands)
	// before it starts, as a check in its folder: a linter runs what the
	// tree holds (its configuration, node_modules/.bin).
	Confine func(spec *phase.Spec)
}

// Reviewer runs Phase 3 for the tasks of one run.
type Reviewer struct {
	cfg    *config.Config
	agent  Agent
	git    *gitrepo.Repo
	log    *slog.Logger
	stet   *stet      // built-in mode; nil in custom mode
	custom [][]string // custom mode: stet_commands split exec-style
	caller phase.Caller
	dir    string // peal's review folder, {state_dir}/review
	off    bool   // custom mode only: the commands failed at run start under on_stet_fail = skip
	checks *check.Checks
	// commitAll: every address round's fix is committed whatever the
	// mode (a task in a worktree: its branch must hold all of its work).
	commitAll bool
	guard     func() error      // see Options.Guard
	confine   func(*phase.Spec) // see Options.Confine
	// settings are the user's review settings, shared by the run's
	// reviewers (pinned.go).
	settings *settings
}

// guarded asks the guard, when there is one, before a review command.
func (rv *Reviewer) guarded() error {
	if rv.guard == nil {
		return nil
	}
	return rv.guard()
}

// Folder is where peal keeps the review state of a run in state_dir: stet's
// state (STET_STATE_DIR), its worktrees (STET_WORKTREE_ROOT) and the record
// of the task under review.
const Folder = "review"

// Note is something deciding the review found to tell the user, for the
// run to log when it is due (a run with a plan that cannot run says
// nothing of its review).
type Note struct {
	Level slog.Level
	Msg   string
	Args  []any
}

// New decides whether this run has Phase 3 and how it reviews; nil means no
// Phase 3. A stet_path that is not an executable file is a warning and no
// review; no stet on PATH means no review either. Without a review, the
// project's checks, when there are any, make Phase 3 alone. It logs
// nothing: what it has to say is in its notes.
func New(o Options) (*Reviewer, []Note) {
	cfg := o.Config
	log := o.Log
	if log == nil {
		log = o.Caller.Log
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rv := &Reviewer{cfg: cfg, agent: o.Agent, git: o.Git, log: log, caller: o.Caller, checks: o.Checks, guard: o.Guard,
		confine: o.Confine, settings: &settings{}}
	var notes []Note
	note := func(level slog.Level, msg string, args ...any) { notes = append(notes, Note{level, msg, args}) }
	checksOnly := func() (*Reviewer, []Note) {
		if rv.checks == nil {
			return nil, notes
		}
		return rv, notes
	}
	if abs, err := filepath.Abs(cfg.StateDir); err == nil {
		rv.dir = filepath.Join(abs, Folder)
	} else {
		rv.dir = filepath.Join(cfg.StateDir, Folder)
	}
	for _, c := range cfg.StetCommands {
		if argv := strings.Fields(c); len(argv) > 0 {
			rv.custom = append(rv.custom, argv)
		}
	}
	if len(rv.custom) > 0 {
		return rv, notes
	}
	path := cfg.StetPath
	if path != "" {
		if !Executable(path) {
			note(slog.LevelWarn, "stet_path is not an executable file: this run reviews nothing", "stet_path", path)
			return checksOnly()
		}
	} else {
		look := o.LookPath
		if look == nil {
			look = config.ResolveCommand
		}
		var err error
		if path, err = look("stet"); err != nil {
			note(slog.LevelInfo, "stet not found on PATH: this run reviews nothing")
			return checksOnly()
		}
	}
	attempts := stetAttempts(cfg)
	runArgs, dropped := formatArgs(cfg.StetRunExtraArgs)
	if len(dropped) > 0 {
		note(slog.LevelWarn, "arguments of stet_run_extra_args that change stet's output format are dropped: peal chooses the output of its review commands itself",
			"set_by", config.Describe("stet_run_extra_args", cfg.Sources), "dropped", strings.Join(dropped, " "))
	}
	rv.stet = &stet{
		path: path, stateDir: filepath.Join(rv.dir, "stet"), worktrees: filepath.Join(rv.dir, "worktrees"),
		startArgs: cfg.StetStartExtraArgs, runArgs: runArgs, attempts: attempts,
		network: cfg.NetworkBudget, caller: o.Caller, log: log, guard: o.Guard, repo: o.Git, settings: rv.settings,
	}
	if cfg.StetStartRef != "" {
		note(slog.LevelWarn, "stet_start_ref is ignored: each task's review session starts at the commit before the task, so that its review covers its own changes only",
			"stet_start_ref", cfg.StetStartRef)
	}
	return rv, notes
}

// stetAttempts is how often one stet (or custom review) command is tried:
// twice under on_stet_fail = retry_once, else once.
func stetAttempts(cfg *config.Config) int {
	if cfg.OnStetFail == config.StetRetryOnce {
		return 2
	}
	return 1
}

// Executable reports whether path is an executable file, as stet_path must
// be for Phase 3 to run.
func Executable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0
}

// Builtin reports whether the built-in stet sequence is used (triage,
// dismiss, sessions and finish exist only there).
func (rv *Reviewer) Builtin() bool { return rv != nil && rv.stet != nil }

// Reviews reports whether Phase 3 reviews the work (stet, or custom review
// commands); without, only the project's checks make it.
func (rv *Reviewer) Reviews() bool { return rv.Builtin() || (rv != nil && len(rv.custom) > 0) }

// Checks are the project's checks Phase 3 runs (nil: none).
func (rv *Reviewer) Checks() *check.Checks {
	if rv == nil {
		return nil
	}
	return rv.checks
}

// Commits reports whether each task's work is committed after its execute
// and after each address round: always in built-in mode, since stet reviews
// committed changes only; in custom mode as commit_after_phase2 says.
func (rv *Reviewer) Commits() bool {
	return rv.Builtin() || (rv != nil && (rv.cfg.CommitAfterPhase2 || rv.commitAll))
}

// Moved is the same reviewer working in another checkout of the work tree
// (the run's worktree of a confined run): its commands run in caller's
// folder, its commits are made by git, its agent calls by agent; its review
// folder, and so the record of an unfinished task's review, and what it
// commits stay the run's. A nil Reviewer gives nil.
func (rv *Reviewer) Moved(caller phase.Caller, git *gitrepo.Repo, agent Agent, gitLock sync.Locker) *Reviewer {
	c := rv.InWorkTree(caller, git, agent, rv.Dir(), gitLock)
	if c != nil {
		c.commitAll = rv.commitAll
	}
	return c
}

// Dir is the reviewer's folder: stet's state and worktrees, and the record
// of the task under review ("" for a nil Reviewer).
func (rv *Reviewer) Dir() string {
	if rv == nil {
		return ""
	}
	return rv.dir
}

// InWorkTree is the reviewer of one task that works in a worktree of its
// own: its stet commands run there (caller's folder), its commits are made
// by git, its triage and address calls by agent, and its review folder
// (stet's state and worktrees, the record of the task under review) is dir,
// so that the reviews of concurrent tasks share nothing; every address
// round's fix is committed, on the task's branch, for the merge. stet makes a
// worktree of its own when a session starts and removes it when it ends:
// those commands hold gitLock, which the run holds while it adds or removes
// worktrees too (git fails on the records of a worktree half made). A nil
// Reviewer gives nil.
func (rv *Reviewer) InWorkTree(caller phase.Caller, git *gitrepo.Repo, agent Agent, dir string, gitLock sync.Locker) *Reviewer {
	if rv == nil {
		return nil
	}
	// What the task shares with the run's reviewer: the configuration, the
	// log and how it reviews. The rest is the task's own.
	c := &Reviewer{cfg: rv.cfg, log: rv.log, custom: rv.custom, off: rv.off, guard: rv.guard, confine: rv.confine, settings: rv.settings,
		caller: caller, git: git, agent: agent, dir: dir, checks: rv.checks.In(caller), commitAll: true}
	if st := rv.stet; st != nil {
		c.stet = &stet{path: st.path, startArgs: st.startArgs, runArgs: st.runArgs, attempts: st.attempts, network: st.network, log: st.log, guard: st.guard,
			caller: caller, stateDir: filepath.Join(dir, "stet"), worktrees: filepath.Join(dir, "worktrees"), gitLock: gitLock,
			repo: git, settings: rv.settings}
	}
	return c
}

// CheckConfig fails a configuration under which the review could not see the
// work it reviews; it runs before any agent call.
func (rv *Reviewer) CheckConfig() error {
	if !rv.Builtin() {
		return nil
	}
	if src, set := rv.cfg.Sources["commit_after_phase2"]; set && src != config.SourceDefault && !rv.cfg.CommitAfterPhase2 {
		return fmt.Errorf("commit_after_phase2 is false (set by %s), but stet (stet_path, or stet on PATH) reviews committed changes only, "+
			"so Phase 3 would review nothing: drop the setting (with stet, peal commits each task's changes before its review), "+
			"review the work tree with stet_commands instead, or run without stet", config.Describe("commit_after_phase2", rv.cfg.Sources))
	}
	return nil
}

// CheckRepo fails a repository whose tasks' work stet could not review: one
// without a commit to start a review at, or with uncommitted changes that no
// task of peal left behind (stet refuses them, and peal would commit them as
// a task's work). It runs before the first task.
func (rv *Reviewer) CheckRepo(ctx context.Context) error {
	if !rv.Builtin() {
		return nil
	}
	if _, err := rv.git.Head(ctx); err != nil {
		if ctx.Err() != nil {
			return err
		}
		return fmt.Errorf("repository %s has no commit yet: stet reviews the commits made after a base commit; make a first commit (git commit --allow-empty -m init)", rv.cfg.RepoPath)
	}
	changes, err := rv.git.Changes(ctx)
	if err != nil || len(changes) == 0 || slices.Contains(rv.cfg.StetStartExtraArgs, "--allow-dirty") {
		return err
	}
	if m, ok := rv.readMarker(); ok {
		rv.log.Info("uncommitted changes are left from an unfinished task", "tasks", m.Tasks, "paths", len(changes))
		return nil
	}
	if rel, err := filepath.Rel(rv.git.Top(), rv.cfg.PlanPath); err == nil && slices.Contains(changes, filepath.ToSlash(rel)) {
		// The plan saved in the repository, as a person first does.
		return fmt.Errorf("repository %s has uncommitted changes (%s), the plan %s among them: stet reviews commits only and refuses to start a review over them; "+
			"commit the plan (git add %s && git commit), or keep it outside the repository, and commit or stash the rest",
			rv.cfg.RepoPath, gitrepo.ListPaths(changes, 3), filepath.ToSlash(rel), filepath.ToSlash(rel))
	}
	return fmt.Errorf("repository %s has uncommitted changes (%s): stet reviews commits only and refuses to start a review over them, "+
		"and peal would commit them as the first task's work; commit or stash them (or add --allow-dirty to stet_start_extra_args)",
		rv.cfg.RepoPath, gitrepo.ListPaths(changes, 3))
}

// Open prepares the review side of a run before its first task. Built-in
// mode: peal's review folder, and a session or worktrees an earlier run left
// behind are cleared. Custom mode: every command runs once, and
// on_stet_fail decides what a failure does (fail and retry_once: the run
// fails; skip: no Phase 3 in this run).
func (rv *Reviewer) Open(ctx context.Context) error {
	if err := owndir.Make(rv.dir); err != nil {
		return fmt.Errorf("review folder %s: %w", rv.dir, err)
	}
	if rv.Builtin() {
		rv.stet.clear(ctx, phase.NoTask)
		return ctx.Err()
	}
	attempts := stetAttempts(rv.cfg)
	for _, argv := range rv.custom {
		err := rv.guarded()
		if err == nil {
			_, _, err = phase.Do(ctx, rv.log, phase.Retry{Attempts: attempts}, func(a phase.Attempt) phase.Spec {
				return rv.customSpec(phase.NoTask, a, argv)
			})
		}
		if err == nil {
			continue
		}
		err = fmt.Errorf("stet command %q at session start: %w", strings.Join(argv, " "), err)
		if ctx.Err() == nil && !endsRun(err) && rv.cfg.OnStetFail == config.StetSkip {
			rv.log.Warn("review commands failed at session start: Phase 3 is skipped for this run (on_stet_fail = skip)", "err", err)
			rv.off = true
			return nil
		}
		return err
	}
	return nil
}

// customSpec is the Spec of a custom review command: stet's folders are set
// for it too, in case it runs stet.
func (rv *Reviewer) customSpec(task int, a phase.Attempt, argv []string) phase.Spec {
	state, worktrees := filepath.Join(rv.dir, "stet"), filepath.Join(rv.dir, "worktrees")
	spec := rv.caller.Spec(phase.Stet, task, a, argv, false)
	spec.Env = append(spec.Env, "STET_STATE_DIR="+state, "STET_WORKTREE_ROOT="+worktrees)
	spec.IdleTimeout = 0
	if rv.confine != nil {
		// Confined as a check (a linter runs what the tree holds), writing
		// stet's folders too.
		rv.confine(&spec)
		if spec.Confine != nil {
			for _, d := range []string{state, worktrees} {
				os.MkdirAll(d, 0o755) // a grant of a missing folder grants nothing; a folder that cannot be made is refused as any path
				spec.Confine.Access.Write = append(spec.Confine.Access.Write, confine.Path{Path: d, Key: "stet's folders"})
			}
		}
	}
	return spec
}

// marker records the tasks whose review session is open and the commit it
// started at, in the review folder. It outlives a crash, an interruption or
// a failure of those tasks, so that the next session knows whose
// uncommitted changes are in the tree and where the unfinished task's work
// began.
type marker struct {
	Tasks    []int  `json:"tasks"`
	Baseline string `json:"baseline"`
}

const markerFile = "task.json"

func (rv *Reviewer) readMarker() (marker, bool) {
	var m marker
	d, err := safefs.OpenDir(rv.dir, false)
	if err != nil {
		return m, false // no review folder yet: no task was left unfinished
	}
	defer d.Close()
	d.RemoveTemps(markerFile) // what a killed save left; the run holds the state folder
	data, err := d.ReadFile(markerFile, 1<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return m, false
	}
	if err == nil && json.Unmarshal(data, &m) == nil && len(m.Tasks) > 0 {
		return m, true
	}
	// Kept aside, not lost (under a name no other copy has): the next
	// session starts as if no task were unfinished.
	aside, kerr := d.KeepUnreadable(markerFile, time.Now())
	if kerr != nil {
		rv.log.Warn("the record of the task under review is unreadable and could not be moved aside", "file", d.Join(markerFile), "err", safefs.Reason(kerr))
	} else {
		rv.log.Warn("the record of the task under review is unreadable; kept aside, it is ignored", "file", aside)
	}
	return marker{}, false
}

// Renumber follows the tasks of an unfinished review to their numbers now
// (now: state.Changes.Now), before any task begins: its work stays its
// task's wherever the task moved. A review whose task is no longer in the
// plan (its text changed, or it was removed) is not continued: its work is
// no task's now, and stet says so if it is left uncommitted.
func (rv *Reviewer) Renumber(now func(was int) (int, bool)) {
	if rv == nil || !rv.Builtin() {
		return
	}
	m, ok := rv.readMarker()
	if !ok {
		return
	}
	moved := false
	for i, t := range m.Tasks {
		n, ok := now(t)
		if !ok {
			rv.log.Warn("the unfinished review of a task whose text changed or that was removed from the plan is not continued", "task", t, "baseline", m.Baseline)
			rv.removeMarker()
			return
		}
		moved = moved || n != t
		m.Tasks[i] = n
	}
	if moved {
		if err := rv.writeMarker(m); err != nil {
			rv.log.Warn("could not renumber the unfinished review of a task that moved in the plan", "err", err)
		}
	}
}

func (rv *Reviewer) writeMarker(m marker) error {
	if err := owndir.Make(rv.dir); err != nil {
		return err
	}
	return state.WriteJSONAtomic(filepath.Join(rv.dir, markerFile), m)
}

func (rv *Reviewer) removeMarker() {
	if err := os.Remove(filepath.Join(rv.dir, markerFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		rv.log.Warn("could not remove the record of the task under review", "err", err)
	}
}

// Session is the review of one task, or of one parallel block whose tasks
// share a commit: a stet session from the commit before the task(s) to the
// end of their Phase 3. A nil Session reviews nothing.
type Session struct {
	rv      *Reviewer
	tasks   []int
	open    bool // a stet session was started and is not finished
	skipped bool // Phase 3 is skipped for these tasks (on_stet_fail = skip)
	// ignored are the ids triage set aside; dismissals are the `stet
	// dismiss` calls still to make for them, in order.
	ignored    map[string]bool
	dismissals []dismissal
	baseline   string // the commit the stet session started at
	// dismissedAll: the last review's findings were all set aside
	// already, before any address round.
	dismissedAll bool
}

// Begin opens the review session of tasks (one task, or the tasks of a
// parallel block), before their first agent call. In built-in mode it
// starts a stet session at the commit before the tasks: the commit the
// unfinished run of the same tasks started at, when an earlier run of them
// did not complete; uncommitted changes left by another unfinished task are
// committed as that task's first. A start that fails follows on_stet_fail
// (skip: the tasks run without Phase 3); an unreachable review model or an
// interruption is returned as is. A nil Reviewer returns a nil Session.
func (rv *Reviewer) Begin(ctx context.Context, tasks []int) (*Session, error) {
	if rv == nil {
		return nil, nil
	}
	s := &Session{rv: rv, tasks: tasks, skipped: rv.off}
	if !rv.Builtin() {
		return s, nil
	}
	baseline, allowDirty, err := rv.baseline(ctx, tasks)
	if err == nil {
		if err = rv.writeMarker(marker{Tasks: tasks, Baseline: baseline}); err != nil {
			err = fmt.Errorf("review folder %s: %w", rv.dir, err)
		}
	}
	if err == nil {
		err = rv.stet.start(ctx, tasks[0], baseline, allowDirty)
	}
	switch {
	case err == nil:
		s.open, s.baseline = true, baseline
		return s, nil
	case ctx.Err() != nil, endsRun(err), refused(err):
		return nil, err
	case rv.cfg.OnStetFail == config.StetSkip:
		rv.log.Warn("review session could not start: the task runs without Phase 3 (on_stet_fail = skip)", "tasks", tasks, "err", err)
		s.skipped = true
		return s, nil
	}
	return nil, err
}

// baseline is the commit the session of tasks starts at, and whether stet
// must accept uncommitted changes: those of the tasks' own unfinished run, or
// only files in peal's own folders.
func (rv *Reviewer) baseline(ctx context.Context, tasks []int) (string, bool, error) {
	head, err := rv.git.Head(ctx)
	if err != nil {
		return "", false, fmt.Errorf("the commit before task %d: %w", tasks[0], err)
	}
	changes, err := rv.git.Changes(ctx)
	if err != nil {
		return "", false, err
	}
	if m, ok := rv.readMarker(); ok {
		mine := func(t int) bool { return slices.Contains(tasks, t) }
		switch {
		case !slices.ContainsFunc(m.Tasks, func(t int) bool { return !mine(t) }):
			// Every task of the unfinished session runs again: its work since
			// the session's start is theirs.
			if m.Baseline != head && rv.git.IsAncestor(ctx, m.Baseline, head) {
				rv.log.Info("resuming the review of an unfinished task from the commit it started at", "tasks", tasks, "baseline", m.Baseline)
				head = m.Baseline
			}
			changes = nil // the unfinished run's changes are the tasks' own
		case slices.ContainsFunc(m.Tasks, mine):
			// Some tasks of that session completed since: its work since the
			// start is partly theirs, and must not be charged to these tasks.
			rv.log.Info("the unfinished review also held tasks that completed since: the review starts at the current commit", "unfinished", m.Tasks, "tasks", tasks)
			changes = nil
		case len(changes) > 0:
			rv.log.Warn("committing the uncommitted changes an unfinished task left, apart from the next task's work", "unfinished", m.Tasks, "next", tasks)
			if _, err := rv.git.Commit(ctx, m.Tasks, "unfinished work (the task did not complete)"); err != nil {
				return "", false, err
			}
			if head, err = rv.git.Head(ctx); err != nil {
				return "", false, err
			}
			changes = nil
		}
	}
	if len(changes) > 0 {
		// Not the tasks' own: stet refuses them, and says so.
		return head, false, nil
	}
	dirty, err := rv.git.AnyChanges(ctx)
	return head, dirty, err
}

// End closes the session after the tasks' Phase 3 (or their failure).
// completed: every task of the session completed, so nothing of theirs is
// left to resume and the record of the session goes; otherwise it stays for
// the next session.
func (s *Session) End(ctx context.Context, completed bool) {
	if s == nil || !s.rv.Builtin() {
		return
	}
	if s.open {
		s.rv.stet.finish(ctx, s.tasks[0])
		s.open = false
	}
	if completed && ctx.Err() == nil {
		s.rv.removeMarker()
	}
}
