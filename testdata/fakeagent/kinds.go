package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"peal/internal/testkit/fakes"
)

// cliKind is the CLI the fake imitates, from the name it was started under;
// "" for the plain fake. Everything that differs between CLIs is in its
// value of fakes.CLIs.
func cliKind() string {
	return fakes.KindOf(filepath.Base(os.Args[0]))
}

// cliCall is a call's argv as the CLI reads it.
type cliCall struct {
	kind  string
	cli   *fakes.CLI
	args  fakes.Args
	usage *fakes.Failure // the CLI's usage error, when the argv is wrong
}

func parseArgs(kind string, argv []string) cliCall {
	c := cliCall{kind: kind, cli: fakes.CLIs[kind]}
	c.args, c.usage = c.cli.Parse(argv)
	return c
}

// subcommand answers the CLIs' status and version commands; false when
// argv is a call.
func subcommand(kind string, argv []string) bool {
	cli := fakes.CLIs[kind]
	switch {
	case slices.Equal(argv, []string{"--version"}):
		fmt.Printf("fake %s 1.0.0\n", kind)
	case cli.Status != nil && slices.Equal(argv, cli.Status.Argv):
		answer := cli.Status.Out
		if os.Getenv(fakes.SessionEnv) == "1" {
			answer = cli.Status.In
		}
		os.Exit(show(answer, ""))
	default:
		return false
	}
	return true
}

// structured reports whether the call asked for the CLI's event stream.
func (c cliCall) structured() bool { return c.args.Any(c.cli.Structured) }

// mayWrite reports whether the call lets the agent edit and run commands
// unattended.
func (c cliCall) mayWrite() bool { return c.args.Any(c.cli.Writes) }

// refuse checks what the CLI checks before it works; done means the fake
// has answered (with code) or waits forever.
func (c cliCall) refuse() (code int, done bool) {
	if c.usage != nil {
		return show(*c.usage, ""), true
	}
	if c.cli.Refuse != nil {
		if f := c.cli.Refuse(c.args); f != nil {
			return show(*f, ""), true
		}
	}
	return 0, false
}

// fail prints a canned failure of the CLI.
func (c cliCall) fail(name string) int {
	f, ok := c.cli.Failures[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "fakeagent: this CLI has no canned failure %q\n", name)
		return fakes.ExitFakeError
	}
	if f.Events != "" && c.structured() {
		// With its event stream, the CLI reports the failure as events.
		f.Text, f.Stderr = f.Events, false
	}
	return show(f, c.cli.Model(c.args))
}

// show prints a failure (or any answer) as the CLI does, and returns its
// exit code; one that goes on forever never returns.
func show(f fakes.Failure, model string) int {
	w := os.Stdout
	if f.Stderr {
		w = os.Stderr
	}
	fmt.Fprintln(w, f.TextFor(model))
	for f.Forever {
		time.Sleep(50 * time.Millisecond)
		if f.Repeat != "" {
			fmt.Fprintln(w, f.Repeat)
		}
	}
	return f.Exit
}

// tools carries out the outcome's edits and commands as far as the call's
// permissions allow, and returns what was refused.
func (c cliCall) tools(out fakes.Outcome) []string {
	var denied []string
	for _, name := range slices.Sorted(mapsKeys(out.Edits)) {
		if !c.mayWrite() {
			fmt.Printf("Permission to edit %s was denied.\n", name)
			denied = append(denied, "edit "+name)
			continue
		}
		writeFile(name, out.Edits[name])
	}
	for _, argv := range out.Commands {
		shown := strings.Join(argv, " ")
		if !c.mayWrite() {
			fmt.Printf(c.cli.RunDenied+"\n", shown)
			denied = append(denied, "run "+shown)
			continue
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		cmd.Run()
	}
	return denied
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// folder is the folder the call works in: its option for it (codex's -C,
// opencode's --dir, the Cursor CLI's --workspace), else the working folder.
func (c cliCall) folder() string {
	for _, opt := range []string{"-C", "--dir", "--workspace"} {
		if d, ok := c.args.Opts[opt]; ok {
			return filepath.Clean(d)
		}
	}
	wd, _ := os.Getwd()
	return wd
}

// session begins the call's session, or resumes the one its argv names, as
// the CLI does: it refuses to resume a session it does not have (or, for
// some CLIs, one of another folder) and to begin one whose id it has, in
// its own words; done means the fake has answered with code (or hangs, as
// opencode does with a session of another folder). The call's own usage
// becomes the session's so far for a CLI whose events count the whole
// session.
func (c cliCall) session(dir, phase string, out *fakes.Outcome, call *fakes.Call) (code int, done bool) {
	sf := c.cli.Session
	if sf == nil {
		return 0, false
	}
	id, resume := "", false
	pos := c.args.Positional
	switch {
	case sf.ResumeSub != "" && len(pos) > 0 && pos[0] == sf.ResumeSub:
		resume = true
		if len(pos) > 1 && pos[1] != "-" {
			id = pos[1]
		}
	case sf.Resume != "" && c.args.Has(sf.Resume):
		id, resume = c.args.Opts[sf.Resume], true
	case sf.Begin != "" && c.args.Has(sf.Begin):
		id = c.args.Opts[sf.Begin]
	}
	where := c.folder()
	own := *out
	switch {
	case resume && id == "":
		// The real CLIs take the latest session, or begin a new one, here:
		// a test must never see it go unnoticed.
		fmt.Fprintln(os.Stderr, "fakeagent: asked to resume a session without an id")
		return fakes.ExitFakeError, true
	case resume:
		turns, err := fakes.SessionTurns(dir, c.kind, id)
		if err != nil {
			fmt.Fprintf(os.Stderr, "fakeagent: sessions: %v\n", err)
			return fakes.ExitFakeError, true
		}
		call.Session, call.Resumed = id, true
		lost := out.SessionLost || len(turns) == 0
		if !lost && turns[0].Dir != where {
			if sf.Hangs {
				forever()
			}
			lost = sf.PerFolder
		}
		if lost {
			f := sf.Lost(id)
			if f.Events != "" && c.structured() {
				fmt.Println(f.Events)
			}
			return show(f, ""), true
		}
		for _, t := range turns {
			call.History = append(call.History, t.Phase)
			if sf.Cumulative {
				out.InputTokens += t.Input
				out.CachedTokens += t.Cached
				out.OutputTokens += t.Output
			}
		}
	case id != "":
		turns, err := fakes.SessionTurns(dir, c.kind, id)
		if err != nil {
			fmt.Fprintf(os.Stderr, "fakeagent: sessions: %v\n", err)
			return fakes.ExitFakeError, true
		}
		if slices.ContainsFunc(turns, func(t fakes.SessionTurn) bool { return t.Dir == where || !sf.PerFolder }) && sf.Taken != nil {
			return show(sf.Taken(id), ""), true
		}
	default:
		id = sf.NewID()
	}
	call.Session, call.Resumed = id, resume
	if err := fakes.AddSessionTurn(dir, fakes.SessionTurn{Kind: c.kind, ID: id, Dir: where, Phase: phase, Input: own.InputTokens, Cached: own.CachedTokens, Output: own.OutputTokens}); err != nil {
		fmt.Fprintf(os.Stderr, "fakeagent: sessions: %v\n", err)
		return fakes.ExitFakeError, true
	}
	if c.structured() {
		line, _ := json.Marshal(sf.Line(id))
		fmt.Println(string(line))
	}
	return 0, false
}

// emitter is how the answer text reaches stdout: as is, or as the CLI's
// events in session.
func (c cliCall) emitter(out fakes.Outcome, session string) func(text string) (int64, error) {
	if !c.structured() {
		return func(text string) (int64, error) {
			n, err := io.WriteString(os.Stdout, text)
			return int64(n), err
		}
	}
	return func(text string) (int64, error) {
		var n int64
		for _, ev := range c.cli.Events(strings.TrimSpace(text), out, session) {
			line, _ := json.Marshal(ev)
			m, err := os.Stdout.Write(append(line, '\n'))
			n += int64(m)
			if err != nil {
				return n, err
			}
		}
		if out.Linger {
			// The answer is out, but the process never exits.
			forever()
		}
		return n, nil
	}
}
