package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"peal/internal/safefs"
	"peal/internal/text"
	"peal/phase"
)

// Repo is git in one folder of a work tree: the work tree's own folder, or
// the folder of a task in its worktree. Its commands are supervised calls
// like any other (a process group of their own, a timeout, the run's
// observer and record), unless it was made by Plain.
type Repo struct {
	caller  phase.Caller
	log     *slog.Logger
	timeout time.Duration
	dir     string // where its commands run
	// top is the top of the work tree; own are peal's folders in it (see
	// exclude).
	top string
	own []string
	// sparse: the work tree is a sparse checkout (a task's worktree under
	// worktree_sparse_paths). Commits then stage what the task wrote
	// outside the checked-out folders too, which a plain `git add -A`
	// refuses.
	sparse bool
	// plain: commands run as plain children, for the programs that are not
	// peal (the fake stet, the demo) and for test set-ups.
	plain bool
	env   []string // added to a plain command's environment
	// where is the work tree's git data, resolved once (pin.go) and named
	// in every command's environment, so that git never looks for it in
	// the tree, where an agent may write a .git of its own.
	pinMu sync.Mutex
	where *folders
	// hooks runs the repository's hooks that its commits and merges
	// trigger (hooks.go): git itself runs none of peal's.
	hooks Hooks
	// guard, when set, is asked before every command (see Guard).
	guard Guard
	// ident, when set, is the identity of its commits (GIT_AUTHOR_*,
	// GIT_COMMITTER_*).
	ident []string
	// users are the repositories the user keeps in the work tree, untracked
	// (NoteEmbedded); fixed are the pathspecs of what its commits leave as
	// the index holds it (Leave).
	users, fixed []string
}

// Identity makes g's commits name and email's, whatever git's
// configuration says.
func (g *Repo) Identity(name, email string) {
	g.ident = []string{"GIT_AUTHOR_NAME=" + name, "GIT_AUTHOR_EMAIL=" + email, "GIT_COMMITTER_NAME=" + name, "GIT_COMMITTER_EMAIL=" + email}
}

// Guard keeps git from running what the run's calls planted: Check, asked
// before every command, refuses it with an error; Accept is told of a
// change peal's own command made to what it watches (the repository's
// configuration, when a worktree becomes sparse).
type Guard interface {
	Check() error
	Accept()
}

// Guard makes every command of g, and of the Repos made from it by In,
// ask guard first.
func (g *Repo) Guard(guard Guard) { g.guard = guard }

// New is git in dir, each command a call of caller under timeout; own are
// peal's folders (state_dir, knowledge_dir, agent_log_dir), left out of
// commits when they lie inside the work tree (`git add -A` stages the whole
// work tree, not only dir).
func New(caller phase.Caller, log *slog.Logger, timeout time.Duration, dir string, own ...string) *Repo {
	return newAt(caller, log, timeout, dir, workTreeTop(dir), own...)
}

// newAt is New for the work tree whose top is top.
func newAt(caller phase.Caller, log *slog.Logger, timeout time.Duration, dir, top string, own ...string) *Repo {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Repo{caller: caller, log: log, timeout: timeout, dir: dir, top: top}
	for _, d := range own {
		abs, err := filepath.Abs(d)
		if err != nil || d == "" {
			continue
		}
		if rel, err := filepath.Rel(g.top, abs); err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") {
			g.own = append(g.own, rel)
		}
	}
	return g
}

// Plain is git in dir for programs that are not peal and for tests: each
// command a plain child with env added to its environment, without
// supervision or a timeout.
func Plain(dir string, env ...string) *Repo {
	return &Repo{log: slog.New(slog.DiscardHandler), dir: dir, top: dir, plain: true, env: env}
}

// In is the git of the same run in the worktree at top, working in dir, a
// task's folder there (sparse: a sparse checkout), its commands calls of
// caller. peal's folders are left out of its commits as they are of the
// work tree's, and its hooks run as the work tree's do. When g is
// resolved (Pin), the worktree's git folder is found now in the
// repository's records of its worktrees, never in the worktree's .git
// file, which an agent can rewrite there; it is named in every command.
func (g *Repo) In(caller phase.Caller, top, dir string, sparse bool) *Repo {
	own := make([]string, len(g.own))
	for i, rel := range g.own {
		own[i] = filepath.Join(g.top, rel)
	}
	w := newAt(caller, g.log, g.timeout, dir, filepath.Clean(top), own...)
	w.sparse, w.guard, w.ident, w.hooks = sparse, g.guard, g.ident, g.hooks
	g.pinMu.Lock()
	if g.where != nil {
		w.where = derive(g.where, w.top)
	}
	g.pinMu.Unlock()
	return w
}

// At is the git of the worktree at top, working there, its commands calls
// of the same caller (see In).
func (g *Repo) At(top string) *Repo { return g.In(g.caller, top, top, false) }

// Dir is where its commands run.
func (g *Repo) Dir() string { return g.dir }

// Top is the top of the work tree its commands run in.
func (g *Repo) Top() string { return g.top }

// Timeout bounds each of its commands.
func (g *Repo) Timeout() time.Duration { return g.timeout }

// KillGrace is how long a command has between SIGTERM and SIGKILL.
func (g *Repo) KillGrace() time.Duration { return g.caller.Limits.KillGrace }

// workTreeTop is the top of the git work tree around dir: the nearest folder
// holding .git (a folder, or a file in a linked worktree); dir itself when
// none is found.
func workTreeTop(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return abs
		}
	}
}

// Cmd is one git command being built: its arguments, and what it reads,
// where its output goes, its environment and its folder.
type Cmd struct {
	g     *Repo
	args  []string
	stdin []byte
	out   io.Writer
	env   []string
	dir   string
	// unpinned: the command that resolves the Repo's folders, run as git
	// finds them, its hooks' folder as configured.
	unpinned bool
}

// Command starts building `git args...`, run in the Repo's folder.
func (g *Repo) Command(args ...string) *Cmd {
	return &Cmd{g: g, args: args, dir: g.dir}
}

// Stdin makes data git's standard input (none: /dev/null).
func (c *Cmd) Stdin(data []byte) *Cmd { c.stdin = data; return c }

// StreamTo streams the whole of git's standard output to w as it comes,
// beyond what a result keeps (a listing of a million files).
func (c *Cmd) StreamTo(w io.Writer) *Cmd { c.out = w; return c }

// Env adds variables to git's environment.
func (c *Cmd) Env(kv ...string) *Cmd { c.env = append(c.env, kv...); return c }

// Dir runs the command in dir instead of the Repo's folder.
func (c *Cmd) Dir(dir string) *Cmd { c.dir = dir; return c }

// Run runs the command and returns its standard output. A command that ran
// and did not exit 0 (or timed out) is an *Error; one that could not start
// is a *phase.StartError; a signal to peal is a *phase.InterruptedError.
func (c *Cmd) Run(ctx context.Context) (string, error) {
	if c.g.guard != nil {
		if err := c.g.guard.Check(); err != nil {
			return "", err
		}
	}
	if c.g.plain {
		return c.runPlain(ctx)
	}
	// Every command runs with peal's settings (safe.go); the one that asks
	// git where the hooks are keeps core.hooksPath as configured.
	argv := append(append([]string{"git"}, safeArgs(c.unpinned)...), c.args...)
	var pin []string
	if !c.unpinned {
		f, err := c.g.resolve(ctx)
		if err != nil {
			return "", err
		}
		// A command run in a folder outside the work tree is about
		// another repository: git finds it there.
		if safefs.Within(c.dir, c.g.top) || safefs.Within(c.dir, f.top) {
			pin = f.env()
		}
	}
	spec := c.g.caller.Command("git", argv, c.g.timeout)
	spec.Dir = c.dir
	spec.InheritOnly = envPass
	spec.Env = append(append(append(slices.Clone(spec.Env), pin...), c.g.ident...), c.env...)
	spec.Stdin = c.stdin
	spec.StdoutSink = c.out
	res, err := phase.Run(ctx, spec)
	if err != nil {
		return res.Stdout, err
	}
	if res.TimedOut || res.ExitCode != 0 {
		gerr := &Error{Args: c.args, ExitCode: res.ExitCode, TimedOut: res.TimedOut, Limit: res.Limit,
			Stderr: tail(res.Stderr), Stdout: tail(res.Stdout), Line: explain(res)}
		if full := fullDisk(c.dir, pin); full != "" && !res.TimedOut {
			// A full disk is said as such: git's own words would read as a
			// failure of the command (or of the identity, for a commit).
			return res.Stdout, &safefs.FullError{Dir: full, Err: gerr}
		}
		return res.Stdout, gerr
	}
	return res.Stdout, nil
}

// fullDisk is the folder, dir or the git data the command named (pin:
// GIT_DIR=, GIT_COMMON_DIR=), whose disk is full; "" when none is.
func fullDisk(dir string, pin []string) string {
	if safefs.DiskFull(dir) {
		return dir
	}
	for _, kv := range pin {
		if v, ok := strings.CutPrefix(kv, "GIT_COMMON_DIR="); ok && safefs.DiskFull(v) {
			return v
		}
		if v, ok := strings.CutPrefix(kv, "GIT_DIR="); ok && safefs.DiskFull(v) {
			return v
		}
	}
	return ""
}

// runPlain runs the command of a Plain Repo.
func (c *Cmd) runPlain(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "git", c.args...)
	cmd.Dir = c.dir
	cmd.Env = append(append(os.Environ(), c.g.env...), c.env...)
	if c.stdin != nil {
		cmd.Stdin = bytes.NewReader(c.stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if c.out != nil {
		cmd.Stdout = io.MultiWriter(&stdout, c.out)
	}
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res := phase.Result{Stdout: stdout.String(), Stderr: stderr.String()}
		return stdout.String(), &Error{Args: c.args, ExitCode: exit.ExitCode(), Stderr: tail(res.Stderr), Stdout: tail(res.Stdout), Line: explain(res)}
	case err != nil:
		return "", &phase.StartError{Program: "git", Err: err}
	}
	return stdout.String(), nil
}

// Error is a git command that ran and failed: it exited non-zero, or it
// outlasted its timeout.
type Error struct {
	Args     []string
	ExitCode int // -1: killed by a signal
	TimedOut bool
	Limit    time.Duration // the limit it outlasted, when TimedOut
	// Stderr and Stdout are the ends of what it printed (tailBytes each).
	Stderr, Stdout string
	// Line is the line of its output that best explains the failure.
	Line string
}

func (e *Error) Error() string {
	name := "git"
	for i, a := range e.Args {
		if i == 2 || strings.HasPrefix(a, "-") {
			break
		}
		name += " " + a
	}
	var msg string
	switch {
	case e.TimedOut:
		msg = fmt.Sprintf("%s did not finish within %s", name, e.Limit)
	case e.ExitCode < 0:
		msg = name + " was killed by a signal"
	default:
		msg = fmt.Sprintf("%s exited with status %d", name, e.ExitCode)
	}
	if e.Line == "" {
		return msg
	}
	return msg + ": " + e.Line
}

// Exited reports whether err is a git command that exited with code.
func Exited(err error, code int) bool {
	var e *Error
	return errors.As(err, &e) && !e.TimedOut && e.ExitCode == code
}

// explain is the line that best explains how a git command failed: its
// last line, and, when that is a fatal summary ("fatal: adding files
// failed") after errors, the first error before it too, which names the
// file or ref that failed ("error: open("data.bin"): Permission denied").
func explain(res phase.Result) string {
	last := phase.Explain(res)
	if !strings.HasPrefix(last, "fatal:") {
		return last
	}
	for _, l := range lines(res.Stderr) {
		if strings.HasPrefix(l, "error:") && text.Meaningful(l) {
			return text.Quote(l) + "; " + last
		}
	}
	return last
}

// tailBytes is how much of each stream an Error keeps: enough for git's
// explanation of a failure, never a surprise of memory.
const tailBytes = 4 << 10

// tail is the end of s, at most tailBytes, trimmed.
func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > tailBytes {
		s = s[len(s)-tailBytes:]
	}
	return s
}

// lines splits git's output into its non-empty lines.
func lines(out string) []string {
	var l []string
	for _, s := range strings.Split(out, "\n") {
		if s = strings.TrimRight(s, "\r"); s != "" {
			l = append(l, s)
		}
	}
	return l
}
