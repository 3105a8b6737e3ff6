// Command peal turns a markdown plan into executed work by driving a coding
// agent CLI through plan, execute and address phases. This package only parses
// the command line, builds the configuration, calls the runner and maps the
// outcome to an exit code.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"
	"unicode"

	"github.com/alecthomas/kong"

	"peal/internal/procs"
	"peal/internal/safefs"
	"peal/plan"
	"peal/runner"
)

// CLI is the command tree.
type CLI struct {
	Version    kong.VersionFlag `help:"Print the version and exit."`
	Run        RunCmd           `cmd:"" help:"Execute a plan: plan, execute and address each task."`
	Prompt     PromptCmd        `cmd:"" help:"Print a prompt that tells an LLM how to write a plan for peal."`
	Config     ConfigCmd        `cmd:"" help:"Print the resolved configuration: every key, its value and the layer that set it."`
	Status     StatusCmd        `cmd:"" help:"Show every task of the plan: completed, failed, deferred, skipped or pending, with its ticket and attempts."`
	RetryState RetryStateCmd    `cmd:"" name:"retry-state" help:"Inspect and reset the retry-state store shared with ticketflow."`
	Report     ReportCmd        `cmd:"" help:"Tell the last run of this configuration: a Markdown job summary, a JSON document or a one-file HTML timeline of every call."`
	Doctor     DoctorCmd        `cmd:"" help:"Check that the agent CLI (and the fallback agent) is installed and can authenticate, and whether stet is found; exit 1 when a check fails."`
	Clean      CleanCmd         `cmd:"" help:"Remove the worktree and branches the runs on the state folder keep in the repository between runs, as far as they hold no work of their own; never while a run uses them."`
}

// newCLI is the command tree with the configuration flags of each command.
// When args begin with a command's name, only that command gets its flags:
// kong builds them by reflection, about half a millisecond per command, and
// a process parses one command.
func newCLI(args ...string) *CLI {
	var cli CLI
	flags := map[string]func(){
		"run":    func() { cli.Run.Plugins = keyFlags(nil, needsPlan) },
		"config": func() { cli.Config.Plugins = keyFlags(nil, nil) },
		"status": func() { cli.Status.Plugins = keyFlags(statusKeys, needsPlan) },
		"retry-state": func() {
			cli.RetryState.Show.Plugins = keyFlags(showKeys, storeNotes)
			cli.RetryState.Reset.Plugins = keyFlags(storeKeys, storeNotes)
			cli.RetryState.Detect.Plugins = keyFlags(detectKeys, nil)
		},
		"doctor": func() { cli.Doctor.Plugins = keyFlags(doctorKeys, storeNotes) },
		"clean":  func() { cli.Clean.Plugins = keyFlags(cleanKeys, storeNotes) },
		"report": func() { cli.Report.Plugins = keyFlags(reportKeys, needsPlan) },
	}
	if len(args) > 0 && flags[args[0]] != nil {
		flags[args[0]]()
		return &cli
	}
	for _, set := range flags {
		set()
	}
	return &cli
}

// env carries what a command needs from the process, so tests can run main in-process.
type env struct {
	ctx     context.Context
	stdin   io.Reader
	environ []string
	stdout  io.Writer
	stderr  io.Writer
	kctx    *kong.Context
	now     func() time.Time
}

// exitError carries an exit code up to main; msg, when set, is printed as one line.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func main() {
	procs.Limit()
	sig := watchSignals()
	// A write to peal's own output whose reader has gone (`peal … | tee`,
	// tee killed) fails instead of killing peal: the run then stops as on a
	// hangup, its agents stopped and its state saved.
	stdout := &outputGuard{w: os.Stdout, lost: sig.lose}
	stderr := &outputGuard{w: os.Stderr, lost: sig.lose}
	code := Main(sig.ctx, os.Args[1:], os.Environ(), stdout, stderr)
	// The signals stay caught until the exit: a signal landing now must not
	// turn the exit code of a finished run into death by that signal.
	os.Exit(code)
}

// Main runs peal with the given arguments and returns the exit code.
func Main(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	parser, err := newParser(stdout, stderr, args...)
	if err != nil {
		fmt.Fprintf(stderr, "peal: internal error: %v\n", err)
		return 1
	}
	p, done := parse(parser, args, stderr)
	if done {
		return p.code
	}
	kctx := p.kctx
	e := &env{ctx: ctx, stdin: os.Stdin, environ: environ, stdout: stdout, stderr: stderr, kctx: kctx, now: time.Now}
	if err := kctx.Run(e); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintf(stderr, "peal: %s\n", oneLine(ee.msg))
			}
			return ee.code
		}
		fmt.Fprintf(stderr, "peal: error: %s\n", oneLine(err.Error()))
		return runner.ExitFailure
	}
	return 0
}

// maxLine bounds the last line peal prints.
const maxLine = 4096

// oneLine makes a message safe to print as one line: line breaks and other
// control characters (terminal escape sequences included) are shown escaped,
// and the message is cut to maxLine bytes.
func oneLine(msg string) string {
	var b strings.Builder
	for _, r := range msg {
		switch {
		case r == '\t':
			b.WriteByte(' ')
		case r == '\n':
			b.WriteString(`\n`)
		case unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r) // C0 and C1 controls are all below 0x100
		default:
			b.WriteRune(r)
		}
		if b.Len() > maxLine {
			return strings.ToValidUTF8(b.String()[:maxLine], "") + "… (cut)"
		}
	}
	return b.String()
}

// newParser is kong's parser of the command line, writing help to stdout.
func newParser(stdout, stderr io.Writer, args ...string) (*kong.Kong, error) {
	return kong.New(newCLI(args...),
		kong.Name("peal"),
		kong.Description("Drive a coding-agent CLI through a markdown plan: plan, execute and address each task, with timeouts, retries and resumable state."),
		kong.Vars{"version": version()},
		kong.NamedMapper("configkey", keyMapper{}),
		kong.ValueFormatter(helpValue),
		kong.Writers(stdout, stderr),
		kong.Exit(func(int) { panic(kongExit{}) }),
		kong.UsageOnError(),
	)
}

// kongExit is how kong's own exits (--help, --version) unwind to Main.
type kongExit struct{}

// parse runs kong; done reports that the process should exit with code.
func parse(parser *kong.Kong, args []string, stderr io.Writer) (p parsedOrCode, done bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(kongExit); !ok {
				panic(r)
			}
			p, done = parsedOrCode{code: 0}, true
		}
	}()
	if len(args) == 0 {
		// Peal showed its help here; one line naming the commands does as well.
		var names []string
		for _, c := range parser.Model.Children {
			if !c.Hidden {
				names = append(names, c.Name)
			}
		}
		fmt.Fprintf(stderr, "peal: error: no command given: use one of %s or %s (peal --help describes them)\n",
			strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
		return parsedOrCode{code: runner.ExitFailure}, true
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		fmt.Fprintf(stderr, "peal: error: %s\n", oneLine(suggestFlag(err.Error())))
		return parsedOrCode{code: runner.ExitFailure}, true
	}
	return parsedOrCode{kctx: kctx}, false
}

type parsedOrCode struct {
	kctx *kong.Context
	code int
}

func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "peal (no build information)"
	}
	return versionOf(info)
}

// versionOf is what `peal --version` says of a build: the module's version
// and the commit the go command recorded (when it built from a git
// checkout: go build and go install do unless -buildvcs=false), with
// whether the checkout had changes, and the Go release.
//
//	peal v0.0.0-20261128034126-dd26f7c3af7a, commit dd26f7c3af7a of 2026-11-28T03:41:26Z, go1.26.8
func versionOf(info *debug.BuildInfo) string {
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	commit := "no commit recorded (built by go run, or with -buildvcs=false)"
	if rev := settings["vcs.revision"]; rev != "" {
		commit = "commit " + rev[:min(12, len(rev))]
		if t := settings["vcs.time"]; t != "" {
			commit += " of " + t
		}
		if settings["vcs.modified"] == "true" {
			commit += ", with uncommitted changes"
		}
	}
	return fmt.Sprintf("peal %s, %s, %s", v, commit, info.GoVersion)
}

// PromptCmd prints the plan-format prompt, with what the person wants
// built.
type PromptCmd struct {
	Want   []string `arg:"" optional:"" name:"description" help:"What you want built, put in the prompt (- reads it from stdin; without it, a pipe or a file on stdin is read)."`
	Output string   `help:"Write the prompt to this file (parent folders are created) instead of stdout." placeholder:"PATH" type:"path"`
}

// maxWant bounds the description read from stdin.
const maxWant = 1 << 20

// Run prints or writes the prompt.
func (c *PromptCmd) Run(e *env) error {
	want, err := c.want(e)
	if err != nil {
		return &exitError{code: 1, msg: "error: " + err.Error()}
	}
	prompt := plan.Prompt(want)
	if c.Output == "" {
		_, err := io.WriteString(e.stdout, prompt)
		return err
	}
	// Atomically, its folders made, never through a link at the path; a
	// full disk is said as such.
	if err := safefs.WriteFile(c.Output, []byte(prompt)); err != nil {
		return &exitError{code: 1, msg: fmt.Sprintf("error: cannot write %s: %v", c.Output, safefs.Full(err, filepath.Dir(c.Output)))}
	}
	return nil
}

// want is the description of what to build: the arguments, or stdin when
// the argument is "-", or when there is none and stdin is a pipe or a file
// (never a terminal, which would wait for a person who did not mean to
// type).
func (c *PromptCmd) want(e *env) (string, error) {
	read := len(c.Want) == 1 && c.Want[0] == "-"
	if len(c.Want) == 0 {
		if f, ok := e.stdin.(*os.File); ok {
			info, err := f.Stat()
			read = err == nil && (info.Mode()&os.ModeNamedPipe != 0 || info.Mode().IsRegular())
		}
	}
	if !read {
		return strings.Join(c.Want, " "), nil
	}
	data, err := io.ReadAll(io.LimitReader(e.stdin, maxWant+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("reading what to build from stdin: %w", err)
	case len(data) > maxWant:
		return "", fmt.Errorf("what to build, on stdin, is over %d bytes: describe it in fewer words", maxWant)
	}
	return strings.ToValidUTF8(string(data), "\uFFFD"), nil
}
