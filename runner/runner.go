// Package runner owns a peal run: reading and normalizing the plan, the
// schedule of tasks, the phases of each task, what a failure does to the run,
// state saves, the run summary and the post-run commands.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"peal/agent"
	"peal/agentcall"
	"peal/check"
	"peal/config"
	"peal/confine"
	"peal/internal/agentlog"
	"peal/internal/gitrepo"
	"peal/internal/owndir"
	"peal/internal/safefs"
	"peal/phase"
	"peal/plan"
	"peal/policy"
	"peal/prompt"
	"peal/review"
	"peal/state"
	"peal/tickets"
	"peal/worktree"
)

// Exit codes of `peal run`.
const (
	ExitOK           = 0
	ExitFailure      = 1
	ExitWithIssues   = 2
	ExitStoppedEarly = 3
	ExitUnreachable  = 4
)

// Outcome is what a run that did not fail hard leaves behind.
type Outcome struct {
	ExitCode int
	// Completed are the tasks this run completed; AlreadyCompleted the
	// selected tasks that earlier runs had completed (not run again).
	Completed        []int
	AlreadyCompleted []int
	Failed           []int
	WithFindings     []int
	Skipped          []int // tickets that used up their retries: nothing ran
	Deferred         []int // left with findings under on_findings_remaining = defer
	// ReviewSkipped are completed tasks whose Phase 3 was skipped under
	// on_stet_fail = skip (the review could not start or failed).
	ReviewSkipped []int
	// Parallel are the tasks of parallel blocks that ran in worktrees of
	// their own, and how their merge went.
	Parallel []state.ParallelTask
	// ChecksFailed are the tasks whose checks still failed after their
	// last address round; ChecksFailing the checks that fail on the final
	// tree (check_commands).
	ChecksFailed  []int
	ChecksFailing []string
}

// StoppedError: the run stopped because max_consecutive_task_failures was
// reached (exit 3).
type StoppedError struct {
	Failures int
	Last     error
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("stopped after %d consecutive task failures (max_consecutive_task_failures); last: %v", e.Failures, e.Last)
}
func (e *StoppedError) Unwrap() error { return e.Last }

// TaskError: a task failed; the run stops (exit 1) unless
// continue_with_remaining_tasks is set.
type TaskError struct {
	Index int
	Err   error
}

func (e *TaskError) Error() string { return fmt.Sprintf("task %d: %v", e.Index, e.Err) }
func (e *TaskError) Unwrap() error { return e.Err }

// run is the state of one `peal run`, made whole by newRun before
// anything starts.
type run struct {
	settings
	cfg     *config.Config
	log     *slog.Logger
	now     func() time.Time
	agents  *agentcall.Agents
	tickets *runTickets
	// sessions are the agent sessions of the tasks (agent_session =
	// "task"; see sessions.go).
	sessions *agentcall.Sessions
	// caller makes the Spec of every call of the run: its limits, its call
	// scope, the observer and the run record.
	caller phase.Caller
	// main is the work tree's site; home is where the tasks that are not
	// in a worktree of a block work, and what reviews and commits there:
	// the work tree, or, where the kernel confines files, the run's
	// worktree once a task or a check needed it (homeT, home.go). A task of
	// a block in a worktree works at a site of its own (worktreeSite).
	main, home *site
	mirror     *worktree.Mirror
	// reviewNotes are what deciding the review found to say (no stet on
	// PATH, say), logged once the plan is known to be good.
	reviewNotes []review.Note
	// trees makes the worktrees of parallel blocks (parallel_isolation =
	// worktree).
	trees *worktree.Set
	// chk is the run's use of the project's checks.
	chk *checking
	// confined confines agent calls, checks and worktree_setup_command
	// (nil: confine = off); confineErr is why it could not be set up; guard
	// keeps peal's git and stet from running what a call planted (nil:
	// confine = off).
	confined   *policy.Rules
	confineErr error
	guard      *gitrepo.Watch
	// gitNoted: the repository's git data is pinned and, confined, the
	// guard made (noteGit).
	gitNoted bool
	// Set once the run holds its state folder: the state, the agent logs
	// (nil: agent_log_dir unset) and the run record (nil: none).
	store     *state.Store
	repo      *state.RepoHold
	changes   state.Changes // the plan's, since its last run
	agentLogs *agentlog.Logs
	journal   *state.Recorder
	// rec writes the run record (see recorder).
	rec *recorder
}

// site is where the calls of a task run, and what a task's work there is
// reviewed, checked and committed with: the work tree (the run's home), or
// a task's worktree. A task is given its site; it shares the rest with its
// run.
type site struct {
	caller phase.Caller // its calls' folder and observer
	// tree is the top of the work tree or worktree its calls may write;
	// main, for a worktree, is the main work tree's top, and linked the
	// worktree_link paths there (none of which its calls may write).
	tree   string
	main   string
	linked []string
	// writable are paths of the main work tree its calls may write too:
	// what git ignores there, linked into the run's worktree.
	writable []string
	git      *gitrepo.Repo
	// reviewer runs Phase 3 there (nil: no Phase 3 in this run); commits
	// says whether the work of an execute is committed.
	reviewer *review.Reviewer
	commits  bool
}

// checks are the project's checks as they run at the site (nil: none).
func (s *site) checks() *check.Checks { return s.reviewer.Checks() }

// Run executes the plan of cfg (already validated) and returns the outcome of
// a run that finished (exit 0 or 2), or an error for a hard failure, a stop
// (*StoppedError) or an interruption (*phase.InterruptedError).
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger, opts ...Option) (Outcome, error) {
	r := newRun(cfg, log, opts...)
	out, err := r.do(ctx)
	r.rec.end(out, err)
	return out, err
}

// newRun makes the whole of a run of cfg with opts: its agents, tickets,
// calls, git, review and checks, and worktrees. It starts nothing and
// writes nothing.
func newRun(cfg *config.Config, log *slog.Logger, opts ...Option) *run {
	var s settings
	for _, o := range opts {
		o(&s)
	}
	r := &run{settings: s, cfg: cfg, log: log, now: time.Now}
	r.chk = &checking{r: r}
	r.rec = &recorder{run: r}
	now := func() time.Time { return r.now() }
	r.sessions = agentcall.NewSessions(cfg.AgentSession == config.SessionTask, log, now)
	r.agents = agentcall.New(agentcall.Options{Config: cfg, Log: log, Now: now, Sleep: s.sleep, Env: s.env, Linger: s.linger,
		LaunchGap: s.launchGap, Recorder: r.rec, Sessions: r.sessions, CallStart: s.callStart,
		Attempt: func(task int) int { return r.tickets.attempt(task) },
		TaskEnv: func(task int) []string {
			if tr := r.tickets.of(task); tr != nil {
				return []string{"PEAL_TICKET_ID=" + tr.id}
			}
			return nil
		}})
	r.confined, r.confineErr = policy.New(cfg, log)
	if s.unenforced {
		r.confined.AsUnenforced()
	}
	r.tickets = newTickets(cfg, log, r.now)
	r.tickets.closed = s.ticketClosed
	r.caller = phase.Caller{
		Dir: cfg.RepoPath,
		Limits: phase.Limits{
			Timeout:   time.Duration(cfg.PhaseTimeoutSec) * time.Second,
			Idle:      time.Duration(cfg.IdleTimeoutSec) * time.Second,
			KillGrace: time.Duration(cfg.KillGraceSec) * time.Second,
		},
		Log: log,
		Env: s.env,
		// Every call carries an id scoped to the state folder (see do).
		Scope:    state.CallScope(cfg.StateDir),
		Recorder: r.rec,
	}
	if s.observer != nil {
		r.caller.Observer = s.observer
	}
	gitTimeout := r.caller.Limits.Timeout
	if s.gitTimeout > 0 {
		gitTimeout = s.gitTimeout
	}
	git := gitrepo.New(r.caller, log, gitTimeout, cfg.RepoPath, cfg.StateDir, cfg.KnowledgeDir, cfg.AgentLogDir)
	git.Guard(guardOf{r})
	git.RunHooks(gitrepo.Hooks{Confine: r.confineHook, Temp: filepath.Join(cfg.StateDir, "tmp")})
	r.main = &site{caller: r.caller, git: git, tree: git.Top()}
	r.main.reviewer, r.reviewNotes = review.New(review.Options{Config: cfg, Agent: r.agents.At(r.callSite(r.main)), Caller: r.caller, Git: git,
		LookPath: s.lookPath, Checks: r.chk.make(), Guard: guardOf{r}.Check, Confine: r.confineCommand})
	r.main.commits = cfg.CommitAfterPhase2 || r.main.reviewer.Commits()
	r.home = r.main
	r.trees = worktree.New(git, log, cfg.StateDir, r.caller.Scope, cfg.WorktreeSparsePaths)
	r.trees.Own(cfg.StateDir, cfg.KnowledgeDir, cfg.AgentLogDir)
	return r
}

// do is Run once the options are applied.
func (r *run) do(ctx context.Context) (Outcome, error) {
	tasks, text, err := r.preflight(ctx)
	if err != nil {
		return Outcome{}, err
	}
	release, err := r.hold(ctx)
	if err != nil {
		return Outcome{}, err
	}
	defer release()
	if tasks, err = r.prepare(ctx, tasks, text); err != nil {
		return Outcome{}, err
	}
	out, err := r.runSegments(ctx, tasks)
	if err == nil {
		err = r.chk.final(ctx, &out)
	}
	// The run's worktree (confined tasks) ends here, whatever happened:
	// its work is in the work tree before the summary and the post-run
	// commands.
	if berr := r.leaveHome(ctx); err == nil {
		err = berr
	}
	return r.finish(ctx, out, err)
}

// preflight is what is checked before anything is written: a configuration
// under which the review could not see the work, or whose confinement
// cannot be had, and a plan that cannot run. It returns the plan's tasks
// and text. The review's own notes (e.g. no stet on PATH) are logged once
// the plan is known to be good.
func (r *run) preflight(ctx context.Context) ([]plan.Task, string, error) {
	cfg := r.cfg
	if err := r.main.reviewer.CheckConfig(); err != nil {
		return nil, "", err
	}
	if r.confineErr != nil {
		return nil, "", r.confineErr
	}
	// A credential in the git configuration the calls read stops the run
	// before it writes anything; a signal does not cut this read short (a
	// run that goes on must know what its calls read).
	if err := r.confined.Repository(context.WithoutCancel(ctx), r.main.git); err != nil {
		return nil, "", err
	}
	// A plan that cannot run is reported before anything is written.
	tasks, text, err := readPlan(cfg)
	if err == nil && len(tasks) > 0 {
		_, err = plan.Select(tasks, cfg.Task, cfg.FromTask)
	}
	return tasks, text, err
}

// hold takes the state folder for the run, before the first agent call (a
// normalization included), so that a second run on it stops at once and
// two runs never work on one task; and makes sure the run can record what
// the agents do before they do it. release lets go of what it holds.
func (r *run) hold(ctx context.Context) (release func(), err error) {
	cfg, log := r.cfg, r.log
	if err := owndir.Make(cfg.StateDir); err != nil {
		return nil, fmt.Errorf("state folder %s (state_dir): %w", cfg.StateDir, safefs.Full(err, cfg.StateDir))
	}
	p := state.Plan{Path: cfg.PlanPath, Repo: cfg.RepoPath}
	store, warnings, err := state.Open(cfg.StateDir, p, r.now())
	if err != nil {
		return nil, err
	}
	// One run at a time on the repository too, whatever its plan.
	if r.repo, err = state.LockRepo(cfg.StateNotes, r.main.tree, state.NewRunNote(cfg.PlanPath, cfg.StateDir, r.now())); err != nil {
		store.Close()
		return nil, err
	}
	release = func() {
		r.sessions.Close()
		r.tickets.store.Close()
		store.Close()
		r.repo.Close()
	}
	for _, w := range warnings {
		log.Warn(w)
	}
	r.store = store
	// Noted in the repository, so that a run, a status or a report started
	// from another folder finds this plan's state.
	if err := state.NoteStateDir(cfg.StateNotes, p, cfg.StateDir, r.now()); err != nil {
		log.Warn("could not note in the repository where this plan's state folder is: commands started from another folder will not find it", "err", err)
	}
	r.sessions.Open(cfg.StateDir, p, store.Completed)
	if err := tickets.CheckStore(cfg.KnowledgeDir); err != nil {
		release()
		return nil, err
	}
	// Every call carries an id scoped to the state folder. Holding the
	// folder's lock, this run knows that whatever still carries such an id
	// from another peal was left by a run that died (SIGKILL) and stops it,
	// so that no earlier agent works beside this run's.
	if n := phase.SweepLeftovers(r.caller.Scope, r.caller.Limits.KillGrace); n > 0 {
		log.Warn("stopped processes an earlier run on this state folder left running (it died without stopping them)", "processes", n)
	}
	r.agentLogs = agentlog.New(cfg.AgentLogDir, r.now(), log)
	r.agents.KeepLogs(r.agentLogs)
	r.rec.start()
	r.confined.LogStart(log)
	return release, nil
}

// prepare readies the run for its tasks: the plan normalized when it needs
// it and selected, the worktrees an earlier run left swept, where the
// repository's git data is and what git and stet will run noted (noteGit:
// before a normalization too), the worktree_link paths checked.
func (r *run) prepare(ctx context.Context, tasks []plan.Task, text string) ([]plan.Task, error) {
	tasks, err := r.loadPlan(ctx, tasks, text)
	if err != nil {
		return nil, err
	}
	r.rec.tasks(tasks)
	for _, n := range r.reviewNotes {
		r.log.Log(ctx, n.Level, n.Msg, n.Args...)
	}
	// What a killed run left is named in the numbers of its plan.
	r.trees.Sweep(ctx, func(was int) bool { n, ok := r.changes.Now(was); return ok && r.store.Completed(n) })
	if err := r.noteGit(ctx); err != nil {
		return nil, err
	}
	r.settleLeft(ctx)
	if len(r.cfg.WorktreeLink) > 0 && r.blockHasWorktrees(tasks) {
		// A path that cannot be linked stops the run before its first
		// agent call, not at its first block.
		if err := r.trees.CheckLinks(ctx, r.cfg.WorktreeLink); err != nil {
			return nil, err
		}
	}
	return tasks, nil
}

// finish ends a run whose schedule ended with out and err: the state on
// disk whatever happened, then, for a run that did not fail hard, its exit
// code, its summary and the post-run commands.
func (r *run) finish(ctx context.Context, out Outcome, err error) (Outcome, error) {
	if err == nil && ctx.Err() != nil {
		// The signal came after the last call had ended: the run still ends
		// as interrupted, with the signal's exit code.
		err = &phase.InterruptedError{Phase: phase.RunName, Cause: context.Cause(ctx)}
	}
	// What the run kept for the user, said again at its end.
	for _, k := range r.trees.Kept() {
		r.log.Warn("kept for you: " + k.Line())
	}
	if err != nil {
		// Every error path of a run passes here: the state is on disk before
		// the error reaches the caller.
		if serr := r.store.Save(); serr != nil {
			r.log.Error("could not save state", "err", serr)
		}
		return Outcome{}, err
	}
	if err := r.store.Save(); err != nil {
		return Outcome{}, err
	}
	if len(out.Failed) > 0 || len(out.WithFindings) > 0 || len(out.Skipped) > 0 || len(out.Deferred) > 0 || len(out.ChecksFailing) > 0 {
		out.ExitCode = ExitWithIssues
	}
	if len(out.ReviewSkipped) > 0 {
		r.log.Warn("Phase 3 was skipped for some tasks (on_stet_fail = skip): their work was not reviewed", "tasks", out.ReviewSkipped)
	}
	r.writeSummary(out)
	// The result is on disk: the next run may start while post-run commands
	// run.
	r.store.Close()
	r.repo.Close()
	r.postRun(ctx)
	if ctx.Err() != nil {
		// A signal during the post-run commands ends the run with its code.
		return out, &phase.InterruptedError{Phase: phase.PostRun, Cause: context.Cause(ctx)}
	}
	return out, nil
}

// noteGit notes, once, before any agent call: where the repository's git
// data is, so that no git of peal's (nor stet's) looks for it in a tree a
// call may write (gitrepo.Repo.Pin); the repositories the user keeps in
// the work tree untracked (gitrepo.Repo.NoteEmbedded); confined, what git and stet will run
// (the hooks and the configuration, gitrepo.Watch); and the review
// settings the user keeps in the work tree, which stet gets from peal
// (review.Reviewer.NoteSettings).
func (r *run) noteGit(ctx context.Context) error {
	if r.gitNoted {
		return nil
	}
	if err := r.main.git.Pin(ctx); err != nil {
		return fmt.Errorf("finding the repository's git folder: %w", err)
	}
	// What no agent call can fix stops the run before the first one.
	if err := r.main.git.Ready(ctx, r.main.commits); err != nil {
		return err
	}
	// The repositories the user keeps in the work tree are theirs; one a
	// call makes is refused (gitrepo.EmbeddedError).
	if err := r.main.git.NoteEmbedded(ctx); err != nil {
		return fmt.Errorf("listing the repositories the work tree holds: %w", err)
	}
	if r.confined != nil {
		var err error
		if r.guard, err = gitrepo.NewWatch(ctx, r.main.git); err != nil {
			return fmt.Errorf("noting the repository's hooks and git configuration before the run: %w", err)
		}
	}
	if err := r.main.reviewer.NoteSettings(); err != nil {
		return err
	}
	r.gitNoted = true
	return nil
}

// callSite is where the agent calls of a site run, and how they are
// confined there.
func (r *run) callSite(at *site) agentcall.Site {
	return agentcall.Site{Caller: at.caller, Confine: func(k *agent.Kind, env []string) *confine.Call { return r.confined.ForCall(at.policy(), k, env) }}
}

// agentCall runs one agent call at a site (see agentcall.Agents.Call).
func (r *run) agentCall(ctx context.Context, at *site, name phase.Name, task, attempts int, failure func(phase.Result) error, prompt string) (phase.Result, error) {
	return r.agents.Call(ctx, r.callSite(at), name, task, attempts, failure, prompt)
}

// runSegments opens the run's ticket (ticket mode) and prepares the review
// side when any task is pending, runs the schedule, and closes the ticket,
// whatever happened.
func (r *run) runSegments(ctx context.Context, tasks []plan.Task) (out Outcome, err error) {
	var pending []plan.Task
	var done []int
	for _, t := range tasks {
		if r.store.Completed(t.Index) {
			done = append(done, t.Index)
		} else {
			pending = append(pending, t)
		}
	}
	// Completed counts this run's work only; what earlier runs did is
	// listed apart, in a run with nothing left to do too.
	defer func() { out.AlreadyCompleted = done }()
	if len(pending) == 0 {
		r.log.Info("every selected task is already completed")
		// The checks still say whether the tree the run leaves passes them.
		return out, r.chk.start(ctx, nil)
	}
	// The agent must be able to authenticate before anything is recorded or
	// started for it: a ticket attempt, a review session.
	if err := r.agents.CheckAuth(ctx, r.callSite(r.main)); err != nil {
		return Outcome{}, err
	}
	if r.cfg.RetryReset {
		if err := r.tickets.reset(pending); err != nil {
			return Outcome{}, err
		}
	}
	if r.cfg.TicketID != "" {
		// terr, not err: the deferred close below must see the run's error.
		tr, terr := r.tickets.begin(r.cfg.TicketID)
		if errors.Is(terr, errSkipped) {
			for _, t := range pending {
				out.Skipped = append(out.Skipped, t.Index)
			}
			return out, nil
		}
		if terr != nil {
			return Outcome{}, terr
		}
		r.tickets.run = tr
		defer func() {
			failed := (err != nil && !isFindingsRemaining(err)) || len(out.Failed) > 0
			r.tickets.end(tr, r.tickets.leftovers, r.tickets.failed, failed, isInterrupted(err))
		}()
	}
	if err := r.main.reviewer.CheckRepo(ctx); err != nil {
		return Outcome{}, err
	}
	if r.main.reviewer != nil {
		if err := r.main.reviewer.Open(ctx); err != nil {
			return Outcome{}, err
		}
	}
	if err := r.chk.start(ctx, pending); err != nil {
		return Outcome{}, err
	}
	return r.schedule(ctx, plan.Segments(tasks))
}

// loadPlan normalizes the plan read by readPlan if it has no task (text is
// its text), and filters it.
func (r *run) loadPlan(ctx context.Context, tasks []plan.Task, text string) ([]plan.Task, error) {
	var err error
	doc := ""
	if len(tasks) == 0 {
		doc = text
		if err := r.noteGit(ctx); err != nil {
			return nil, err
		}
		if tasks, err = r.normalize(ctx, text); err != nil {
			return nil, err
		}
	}
	if r.observer != nil {
		r.observer.PlanLoaded(len(tasks))
	}
	r.align(tasks, doc)
	return plan.Select(tasks, r.cfg.Task, r.cfg.FromTask)
}

// align ties the state to every task of the plan as it is now and says in
// one line what changed since its last run; a task's ticket, sessions and
// unfinished review follow its text.
func (r *run) align(tasks []plan.Task, doc string) {
	ch := r.store.Align(state.Texts(tasks, doc))
	r.changes, r.tickets.part = ch, r.store.Ticket
	switch line := ch.Line(); {
	case ch.Warning != "" || len(ch.Again) > 0:
		r.log.Warn(line)
	case line != "":
		r.log.Info(line)
	}
	r.sessions.Renumber(ch.Now)
	r.main.reviewer.Renumber(ch.Now)
}

// readPlan reads and parses the plan of cfg (see plan.Read).
func readPlan(cfg *config.Config) ([]plan.Task, string, error) {
	return plan.Read(cfg.PlanPath, cfg.NormalizePlan)
}

// phaseAttempts is how many attempts a plan or execute call of cfg has:
// 1 + phase_retry_count.
func phaseAttempts(cfg *config.Config) int { return 1 + int(cfg.PhaseRetryCount) }

// planTask runs Phase 1 at a site and returns the plan text.
func (r *run) planTask(ctx context.Context, at *site, t plan.Task) (string, error) {
	attempts := phaseAttempts(r.cfg)
	ask := prompt.Plan(t.Body)
	res, err := r.agentCall(ctx, at, phase.Plan, t.Index, attempts, nil, ask)
	if err != nil {
		return "", err
	}
	text := strings.TrimSpace(res.Stdout)
	if !r.cfg.ValidatePlanText || planTextValid(r.cfg, text) {
		return text, nil
	}
	r.log.Warn("plan text is empty or too short, running the plan call once more", "task", t.Index, "len", len(text))
	if res, err = r.agentCall(ctx, at, phase.Plan, t.Index, attempts, nil, ask); err != nil {
		return "", err
	}
	if text = strings.TrimSpace(res.Stdout); !planTextValid(r.cfg, text) {
		return "", fmt.Errorf("plan text still empty or too short after a second plan call (%d characters; min_plan_text_len %s)", len(text), minPlanLen(r.cfg))
	}
	return text, nil
}

func planTextValid(cfg *config.Config, text string) bool {
	if text == "" {
		return false
	}
	min := cfg.MinPlanTextLen
	return min == nil || uint64(len(text)) >= *min
}

func minPlanLen(cfg *config.Config) string {
	if cfg.MinPlanTextLen == nil {
		return "unset"
	}
	return fmt.Sprint(*cfg.MinPlanTextLen)
}

// execute runs Phase 2 at a site.
func (r *run) execute(ctx context.Context, at *site, t plan.Task, planText string) error {
	_, err := r.agentCall(ctx, at, phase.Execute, t.Index, phaseAttempts(r.cfg), nil, prompt.Execute(planText))
	return err
}

// normalize asks the agent to turn a document without task headings into a
// plan; an output that still has no task counts as a failed attempt.
func (r *run) normalize(ctx context.Context, doc string) ([]plan.Task, error) {
	template := ""
	if p := r.cfg.NormalizePromptPath; p != "" {
		data, err := safefs.ReadFile(p, plan.MaxBytes)
		if err != nil {
			return nil, fmt.Errorf("normalize prompt %s: %w", p, safefs.Reason(err))
		}
		template = string(data)
	}
	var tasks []plan.Task
	failure := func(res phase.Result) error {
		if err := phase.CheckExit(res); err != nil {
			return err
		}
		parsed, err := plan.Normalized(res.Stdout)
		if err == nil {
			tasks = parsed
		}
		return err
	}
	r.log.Info("plan has no task heading, normalizing it with the agent")
	attempts := 1 + int(r.cfg.NormalizeRetryCount)
	// In the work tree itself: a call in plan mode, which writes nothing.
	if _, err := r.agentCall(ctx, r.main, phase.Normalize, phase.NoTask, attempts, failure, prompt.Normalize(template, doc)); err != nil {
		return nil, fmt.Errorf("plan %s could not be normalized: %w", r.cfg.PlanPath, err)
	}
	return tasks, nil
}

// writeSummary writes the run summary; a failure is only a warning.
func (r *run) writeSummary(out Outcome) {
	sum := state.RunSummary{
		TasksCompleted:             nonNil(out.Completed),
		TasksAlreadyCompleted:      nonNil(out.AlreadyCompleted),
		TasksFailed:                nonNil(out.Failed),
		TasksWithRemainingFindings: nonNil(out.WithFindings),
		TasksSkipped:               nonNil(out.Skipped),
		TasksDeferred:              nonNil(out.Deferred),
		TasksReviewSkipped:         nonNil(out.ReviewSkipped),
		ExitCode:                   out.ExitCode,
		PlanPath:                   r.cfg.PlanPath,
		RepoPath:                   r.cfg.RepoPath,
		CompletedAt:                r.now().UTC().Format(time.RFC3339),
		Usage:                      r.agents.Usage(),
		ParallelTasks:              out.Parallel,
		TasksChecksFailed:          out.ChecksFailed,
		ChecksFailing:              out.ChecksFailing,
		Kept:                       r.trees.Kept(),
	}
	if err := state.WriteJSONAtomic(r.cfg.RunSummaryPath, sum); err != nil {
		r.log.Warn("could not write the run summary", "path", r.cfg.RunSummaryPath, "err", err)
	}
}

func nonNil(xs []int) []int {
	if xs == nil {
		return []int{}
	}
	return xs
}

// isInterrupted reports whether err ends a run that was interrupted by a signal.
func isInterrupted(err error) bool {
	var ie *phase.InterruptedError
	return errors.As(err, &ie)
}
