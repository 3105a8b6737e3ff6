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
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

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
	Doctor     DoctorCmd        `cmd:"" help:"Check that the agent CLI (and the fallback agent) is installed and can authenticate, and whether stet is found; exit 1 when a check fails."`
}

// env carries what a command needs from the process, so tests can run main in-process.
type env struct {
	ctx     context.Context
	environ []string
	stdout  io.Writer
	stderr  io.Writer
	kctx    *kong.Context
}

// exitError carries an exit code up to main; msg, when set, is printed as one line.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func main() {
	ctx, stop := withSignals(context.Background())
	code := Main(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Main runs peal with the given arguments and returns the exit code.
func Main(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	var cli CLI
	parser, err := kong.New(&cli,
		kong.Name("peal"),
		kong.Description("Drive a coding-agent CLI through a markdown plan: plan, execute and address each task, with timeouts, retries and resumable state."),
		kong.Vars{"version": version()},
		kong.ValueFormatter(helpValue),
		kong.Writers(stdout, stderr),
		kong.Exit(func(int) { panic(kongExit{}) }),
		kong.UsageOnError(),
	)
	if err != nil {
		fmt.Fprintf(stderr, "peal: internal error: %v\n", err)
		return 1
	}
	p, done := parse(parser, args, stderr)
	if done {
		return p.code
	}
	kctx := p.kctx
	e := &env{ctx: ctx, environ: environ, stdout: stdout, stderr: stderr, kctx: kctx}
	if err := kctx.Run(e); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintf(stderr, "peal: %s\n", ee.msg)
			}
			return ee.code
		}
		fmt.Fprintf(stderr, "peal: error: %v\n", err)
		return runner.ExitFailure
	}
	return 0
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
	kctx, err := parser.Parse(args)
	if err != nil {
		fmt.Fprintf(stderr, "peal: error: %v\n", err)
		return parsedOrCode{code: runner.ExitFailure}, true
	}
	return parsedOrCode{kctx: kctx}, false
}

type parsedOrCode struct {
	kctx *kong.Context
	code int
}

// withSignals returns a context cancelled by the first SIGINT or SIGTERM, with
// the signal as its cause.
func withSignals(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case s := <-sigs:
			cancel(&signalCause{sig: s.(syscall.Signal)})
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(sigs); cancel(nil) }
}

// signalCause is the cause of a context cancelled by a signal.
type signalCause struct{ sig syscall.Signal }

func (s *signalCause) Error() string { return "received " + signalName(s.sig) }

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

// nowFunc is the clock of commands (a variable so tests can fix it).
var nowFunc = time.Now

func version() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
}

// PromptCmd prints the plan-format prompt.
type PromptCmd struct {
	Output string `help:"Write the prompt to this file (parent folders are created) instead of stdout." placeholder:"PATH" type:"path"`
}

// Run prints or writes the prompt.
func (c *PromptCmd) Run(e *env) error {
	if c.Output == "" {
		_, err := io.WriteString(e.stdout, runner.PlanFormatPrompt)
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.Output), 0o755); err != nil {
		return &exitError{code: 1, msg: fmt.Sprintf("error: cannot create the folder of %s: %v", c.Output, err)}
	}
	if err := os.WriteFile(c.Output, []byte(runner.PlanFormatPrompt), 0o644); err != nil {
		return &exitError{code: 1, msg: fmt.Sprintf("error: cannot write %s: %v", c.Output, err)}
	}
	return nil
}
