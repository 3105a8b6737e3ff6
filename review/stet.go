package review

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"peal/internal/gitrepo"
	"peal/internal/text"
	"peal/phase"
)

// stet drives the real stet CLI: `start`, `run`, `dismiss`, `finish`,
// `status` and `cleanup`, with its state and worktrees in peal's state
// folder. Every command is a supervised child fed to the one retry loop
// (phase.Do) with its own policy. stet's exit codes decide: 0 success (with
// or without findings), 2 the review model is unreachable (a network
// failure: the network budget and delays of agent calls apply, and when it
// persists the run stops with exit 4) unless stet says the model refused
// the request ("LLM bad request": fatal, exit 1), anything else a stet
// failure.
type stet struct {
	path      string
	stateDir  string // STET_STATE_DIR
	worktrees string // STET_WORKTREE_ROOT
	startArgs []string
	runArgs   []string
	attempts  int                 // 2 under on_stet_fail = retry_once
	network   func() phase.Budget // the budget of exit 2, the model unreachable
	caller    phase.Caller
	log       *slog.Logger
	// gitLock, when set, is held by the commands that add or remove stet's
	// worktree (start, finish, cleanup): other worktrees of the repository
	// are made and removed meanwhile.
	gitLock sync.Locker
	guard   func() error // see Options.Guard
	// repo is the git of the tree stet reviews; settings the user's
	// review settings (pinned.go); shim the folder of the git stet's
	// commands find first on their PATH, written once.
	repo     *gitrepo.Repo
	settings *settings
	shimOnce sync.Once
	shim     string
	shimErr  error
}

// locked runs fn holding gitLock, when there is one.
func (s *stet) locked(fn func()) {
	if s.gitLock != nil {
		s.gitLock.Lock()
		defer s.gitLock.Unlock()
	}
	fn()
}

// env points stet at peal's folders, whatever the environment says, gives
// it the user's settings, and puts peal's git for it first on its PATH.
func (s *stet) env() []string {
	env := append(slices.Clone(s.settings.vars()), "STET_STATE_DIR="+s.stateDir, "STET_WORKTREE_ROOT="+s.worktrees)
	if s.shim != "" {
		env = append(env, "PATH="+s.shim+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	return env
}

// ready is asked before every stet command: the run's guard, the tree's
// review settings (the user's, or none), and peal's git for stet, written
// once.
func (s *stet) ready() error {
	if s.guard != nil {
		if err := s.guard(); err != nil {
			return err
		}
	}
	if s.repo == nil {
		return nil
	}
	if err := s.settings.checkTree(s.repo.Top()); err != nil {
		return err
	}
	s.shimOnce.Do(func() {
		s.shim, s.shimErr = gitShim(filepath.Join(filepath.Dir(s.stateDir), "git"), s.repo, s.worktrees)
	})
	if s.shimErr != nil {
		return fmt.Errorf("writing the git of stet's commands: %w", s.shimErr)
	}
	return nil
}

// spec is the Spec of one stet command. The idle timeout does not apply: a
// review prints nothing while the model works on a hunk, however long that
// takes, and stet bounds each model request itself; phase_timeout_sec
// bounds the whole command.
func (s *stet) spec(task int, a phase.Attempt, argv []string) phase.Spec {
	spec := s.caller.Spec(phase.Stet, task, a, argv, false)
	spec.Env = append(spec.Env, s.env()...)
	spec.IdleTimeout = 0
	return spec
}

// exitRule classifies a finished stet command by its exit status: 0 is
// success; 2 means the review model could not be reached (network, drawing
// on the network budget), or, when stet says "LLM bad request", that it
// refused the request (fatal); anything else, or a timeout, is an ordinary
// failure.
func exitRule(command string) phase.Classifier {
	return func(res phase.Result) phase.Verdict {
		switch {
		case res.TimedOut:
			return phase.Verdict{Class: phase.Ordinary, Err: phase.CheckExit(res)}
		case res.ExitCode == 0:
			return phase.Verdict{Class: phase.Succeeded}
		case res.ExitCode == 2:
			if said := badRequest(res.Stderr); said != "" {
				return phase.Verdict{Class: phase.Fatal, Err: &BadRequestError{Command: command, Said: said}}
			}
			return phase.Verdict{Class: phase.Network, Err: &StetError{Command: command, Code: 2, Cause: Cause(res.Stderr)}}
		}
		return phase.Verdict{Class: phase.Ordinary, Err: &StetError{Command: command, Code: res.ExitCode, Cause: Cause(res.Stderr)}}
	}
}

// documentRule is the rule of the command that lists the findings: besides
// its exit status, its stdout must be the JSON document of the findings
// (`{"findings": [...]}`). Anything else (NDJSON events, stet's human
// format) is a stet failure, never a finding. The review read from the
// document of the call that succeeded is left in parsed.
func documentRule(command string, parsed *Review) phase.Classifier {
	rule := exitRule(command)
	return func(res phase.Result) phase.Verdict {
		v := rule(res)
		if v.Class != phase.Succeeded {
			return v
		}
		rv, ok := findingsDocument(res.Stdout)
		if !ok {
			return phase.Verdict{Class: phase.Ordinary, Err: &OutputError{Command: command, Output: res.Stdout}}
		}
		*parsed = rv
		return v
	}
}

// findingsDocument reads out when it is one JSON object with a findings
// array of findings, as `stet run --output=json` prints it; false
// otherwise. It reads keys exactly, and gives the review ParseReview(out,
// 0) gives: the document is decoded once.
func findingsDocument(out string) (Review, bool) {
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var doc map[string]any
	if dec.Decode(&doc) != nil || dec.More() {
		return Review{}, false
	}
	if _, ok := doc["findings"].([]any); !ok {
		return Review{}, false
	}
	present, structured, findings := readReview(doc)
	if !structured {
		return Review{}, false
	}
	return Review{Output: out, Present: present, Structured: true, Findings: findings}, true
}

// formatArgs are the options of `stet run` that choose what it prints:
// peal chooses that itself for both of its review commands (--output=json,
// and --stream on the first), so a user's own are dropped. --output takes
// its value as the next argument or after "=".
func formatArgs(args []string) (kept, dropped []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(a, "=")
		switch name {
		case "--stream", "--json":
			dropped = append(dropped, a)
		case "--output":
			dropped = append(dropped, a)
			if !hasValue && i+1 < len(args) {
				i++
				dropped = append(dropped, args[i])
			}
		default:
			kept = append(kept, a)
		}
	}
	return kept, dropped
}

// call runs one stet command under the exit-code rule. prepare, when set,
// runs before every attempt after the first (a retry from a clean slate).
func (s *stet) call(ctx context.Context, task int, args []string, attempts int, prepare func(context.Context), detail func() string, sink *eventSink) (phase.Result, error) {
	return s.callRule(ctx, task, args, attempts, exitRule("stet "+args[0]), prepare, detail, sink)
}

// callRule is call under another classifier than the exit-code rule.
func (s *stet) callRule(ctx context.Context, task int, args []string, attempts int, rule phase.Classifier, prepare func(context.Context), detail func() string, sink *eventSink) (phase.Result, error) {
	command := "stet " + args[0]
	if err := s.ready(); err != nil {
		return phase.Result{}, err
	}
	argv := append([]string{s.path}, args...)
	policy := phase.Retry{Attempts: attempts, Classify: rule, Budgets: map[phase.Class]phase.Budget{phase.Network: s.network()}}
	res, _, err := phase.Do(ctx, s.log.With("task", task), policy, func(a phase.Attempt) phase.Spec {
		if a.N > 1 && prepare != nil {
			prepare(ctx)
		}
		spec := s.spec(task, a, argv)
		spec.Detail = detail
		if sink != nil {
			sink.reset()
			spec.StdoutSink = sink
		}
		return spec
	})
	var ue *phase.UnreachableError
	if errors.As(err, &ue) {
		return res, &UnreachableError{Command: command, Cause: Cause(res.Stderr), err: ue}
	}
	var refused *BadRequestError
	if errors.As(err, &refused) {
		return res, refused
	}
	if err != nil {
		return res, fmt.Errorf("%s: %w", command, err)
	}
	return res, nil
}

// start opens a review session at baseline (a commit). allowDirty passes
// --allow-dirty: the uncommitted changes are known to be the task's own.
// retry_once retries from a clean slate.
func (s *stet) start(ctx context.Context, task int, baseline string, allowDirty bool) error {
	args := []string{"start", baseline}
	if allowDirty {
		args = append(args, "--allow-dirty")
	}
	args = append(args, s.startArgs...)
	var err error
	s.locked(func() {
		_, err = s.call(ctx, task, args, s.attempts, func(ctx context.Context) { s.clearLocked(ctx, task) }, nil, nil)
	})
	return err
}

// startArgv is what start runs for a session at <baseline> (for the dry run).
func (s *stet) startArgv() []string {
	return append([]string{s.path, "start", "<commit before the task>"}, s.startArgs...)
}

// streamArgv and listArgv are the two commands of a review: the review
// itself, streaming its progress, then the session's active findings as one
// JSON document (the streaming form does not print them; a run with nothing
// new to review prints them at once, without asking the model).
func (s *stet) streamArgv() []string {
	return append([]string{"run", "--output=json", "--stream"}, s.runArgs...)
}

func (s *stet) listArgv() []string {
	return append([]string{"run", "--output=json"}, s.runArgs...)
}

// review reviews the session's new commits and returns every active finding
// of the session.
func (s *stet) review(ctx context.Context, task int) (Review, error) {
	sink := &eventSink{log: s.log, task: task}
	if _, err := s.call(ctx, task, s.streamArgv(), s.attempts, nil, sink.detail, sink); err != nil {
		return Review{}, err
	}
	var rv Review
	res, err := s.callRule(ctx, task, s.listArgv(), s.attempts, documentRule("stet run", &rv), nil, nil, nil)
	if err != nil {
		return Review{}, err
	}
	rv.Stderr = res.Stderr
	s.log.Info("review finished", "task", task, "findings", rv.Count(), "hunks_reviewed", sink.hunks())
	return rv, nil
}

// dismiss runs `stet dismiss ID REASON`; a failure is only a warning.
func (s *stet) dismiss(ctx context.Context, task int, d dismissal) {
	if _, err := s.call(ctx, task, []string{"dismiss", d.ID, d.Reason}, 1, nil, nil, nil); err != nil {
		s.log.Warn("stet dismiss failed, continuing", "task", task, "id", d.ID, "reason", d.Reason, "err", err)
	}
}

// finish closes the session. It runs even after a failure or a signal,
// under its own deadline; a failure is only a warning. It reports whether
// the session is closed.
func (s *stet) finish(ctx context.Context, task int) (closed bool) {
	s.locked(func() { closed = s.finishLocked(ctx, task) })
	return closed
}

// finishLocked is finish for a caller that holds gitLock.
func (s *stet) finishLocked(ctx context.Context, task int) bool {
	// A signal that comes while the finish runs (the one that closes a
	// session an earlier run left open, a hung one included) stops it as it
	// stops any call: SIGTERM, then SIGKILL after the kill grace. After a
	// signal, the finish runs best-effort, without holding peal up longer
	// than the kill grace (a second signal ends it at once: the hard stop
	// travels with the context's values).
	parent, timeout := ctx, s.caller.Limits.Timeout
	if ctx.Err() != nil {
		parent, timeout = context.WithoutCancel(ctx), min(timeout, max(s.caller.Limits.KillGrace, time.Second))
	}
	fctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	if _, err := s.call(fctx, task, []string{"finish"}, 1, nil, nil, nil); err != nil {
		s.log.Warn("stet finish failed", "task", task, "err", err)
		return false
	}
	return true
}

// clear finds a session or worktrees that an earlier run left behind (a
// crash, an interruption, a failed start) and removes them: `stet status`
// tells whether a session is open, `stet finish` closes it, `stet cleanup`
// removes worktrees no session owns. Failures are warnings: a start that
// still cannot succeed says why.
func (s *stet) clear(ctx context.Context, task int) {
	s.locked(func() { s.clearLocked(ctx, task) })
}

// clearLocked is clear for a caller that holds gitLock.
func (s *stet) clearLocked(ctx context.Context, task int) {
	open, err := s.open(ctx, task)
	if err != nil {
		s.log.Warn("could not ask stet for a session left open", "err", err)
	}
	if open {
		s.log.Warn("a review session was left open (a crash, an interruption or a failed start): closing it with stet finish")
		s.finishLocked(ctx, task)
	}
	if entries, _ := os.ReadDir(s.worktrees); len(entries) > 0 {
		if _, err := s.call(ctx, task, []string{"cleanup"}, 1, nil, nil, nil); err != nil {
			s.log.Warn("stet cleanup failed", "err", err)
		}
	}
}

// open reports whether stet has a session open (`stet status` exits 0; 1
// means none).
func (s *stet) open(ctx context.Context, task int) (bool, error) {
	statusRule := func(res phase.Result) error {
		switch {
		case res.TimedOut:
			return phase.CheckExit(res)
		case res.ExitCode == 0, res.ExitCode == 1:
			return nil
		}
		return &StetError{Command: "stet status", Code: res.ExitCode, Cause: Cause(res.Stderr)}
	}
	if err := s.ready(); err != nil {
		return false, err
	}
	res, _, err := phase.Do(ctx, s.log, phase.Retry{Attempts: 1, Failure: statusRule}, func(a phase.Attempt) phase.Spec {
		return s.spec(task, a, []string{s.path, "status"})
	})
	if err != nil {
		return false, fmt.Errorf("stet status: %w", err)
	}
	return res.ExitCode == 0, nil
}

// eventSink reads the NDJSON events of `stet run --stream` as they arrive:
// progress messages feed the live status line and the log. Events are never
// findings: the findings come from the JSON document of the review.
type eventSink struct {
	log     *slog.Logger
	task    int
	mu      sync.Mutex
	partial []byte
	last    string
	reviewd int
}

func (e *eventSink) reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.partial, e.last, e.reviewd = nil, "", 0
}

func (e *eventSink) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.partial = append(e.partial, p...)
	for {
		i := bytes.IndexByte(e.partial, '\n')
		if i < 0 {
			break
		}
		e.event(e.partial[:i])
		e.partial = e.partial[i+1:]
	}
	if len(e.partial) > 64<<10 {
		e.partial = nil // not an event stream; nothing to show
	}
	return len(p), nil
}

// event handles one line; callers hold mu.
func (e *eventSink) event(line []byte) {
	var ev struct {
		Type string `json:"type"`
		Msg  string `json:"msg"`
	}
	if json.Unmarshal(line, &ev) != nil || ev.Type != "progress" {
		return
	}
	msg := text.Quote(ev.Msg)
	if r := []rune(msg); len(r) > 80 {
		msg = string(r[:80]) + "…"
	}
	if strings.HasPrefix(msg, "Reviewing hunk ") {
		e.reviewd++
	}
	e.last = msg
	e.log.Debug("review progress", "task", e.task, "msg", msg)
}

// detail is what the status line shows of the review.
func (e *eventSink) detail() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.last == "" {
		return "review"
	}
	return "review: " + e.last
}

func (e *eventSink) hunks() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reviewd
}
