// Command fakestet stands in for the stet code-review CLI in tests: it keeps
// its review session in $FAKE_STET_DIR/session.json, records each call in
// $FAKE_STET_DIR/stet-calls.jsonl and follows the scenario in
// $FAKE_STET_DIR/stet-scenario.json (see package peal/internal/fakes).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"peal/internal/fakes"
)

func main() {
	dir := os.Getenv(fakes.StetDirEnv)
	if dir == "" {
		fmt.Fprintf(os.Stderr, "fakestet: %s is not set\n", fakes.StetDirEnv)
		os.Exit(fakes.ExitNoStetDir)
	}
	scenario, err := fakes.ReadStetScenario(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakestet: bad scenario: %v\n", err)
		os.Exit(fakes.ExitBadScenario)
	}

	var cmd string
	var args []string
	if len(os.Args) > 1 {
		cmd, args = os.Args[1], os.Args[2:]
	}
	cwd, _ := os.Getwd()
	call, err := fakes.RecordStetStart(dir, fakes.StetCall{
		Cmd: cmd, Args: args, Cwd: cwd, PID: os.Getpid(), Time: time.Now(),
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakestet: record start: %v\n", err)
		os.Exit(fakes.ExitFakeError)
	}

	code := handle(dir, scenario, cmd, args, call.N)

	call.Time = time.Now()
	call.Exit = code
	if err := fakes.RecordStetEnd(dir, call); err != nil {
		fmt.Fprintf(os.Stderr, "fakestet: record end: %v\n", err)
		os.Exit(fakes.ExitFakeError)
	}
	os.Exit(code)
}

// handle applies any scenario rule for the n-th call of cmd and otherwise
// performs the sub-command, returning the exit code.
func handle(dir string, sc fakes.StetScenario, cmd string, args []string, n int) int {
	if out, ok := sc.Pick(cmd, n); ok {
		if out.IgnoreTerm {
			signal.Ignore(syscall.SIGTERM)
		}
		if out.SleepMS > 0 {
			time.Sleep(time.Duration(out.SleepMS) * time.Millisecond)
		}
		if out.Hang {
			for {
				time.Sleep(time.Hour) // block until killed
			}
		}
		if out.Exit != 0 || out.Stdout != "" {
			fmt.Print(out.Stdout)
			fmt.Fprint(os.Stderr, out.Stderr)
			return out.Exit
		}
		fmt.Fprint(os.Stderr, out.Stderr)
	}

	switch cmd {
	case "start":
		return update(dir, func(s *fakes.Session) error {
			*s = fakes.Session{
				Active:    slices.Clone(sc.Findings),
				Dismissed: map[string]string{},
				Started:   true,
			}
			return nil
		})
	case "run":
		return run(dir, sc, args)
	case "dismiss":
		if len(args) < 2 {
			fmt.Fprintln(os.Stderr, "fakestet: usage: dismiss ID REASON")
			return 1
		}
		return update(dir, func(s *fakes.Session) error { return s.Dismiss(args[0], args[1]) })
	case "finish":
		return update(dir, func(s *fakes.Session) error {
			s.Started = false
			return nil
		})
	default:
		fmt.Fprintf(os.Stderr, "fakestet: unknown command %q\n", cmd)
		return 2
	}
}

func update(dir string, fn func(*fakes.Session) error) int {
	if err := fakes.UpdateSession(dir, fn); err != nil {
		fmt.Fprintf(os.Stderr, "fakestet: %v\n", err)
		return 1
	}
	return 0
}

func run(dir string, sc fakes.StetScenario, args []string) int {
	s, err := fakes.LoadSession(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakestet: %v\n", err)
		return 1
	}
	mode := fakes.OutputHuman
	if wantsJSON(args) {
		mode = sc.Output
		if mode == "" {
			mode = fakes.OutputJSON
		}
	}
	switch mode {
	case fakes.OutputJSON:
		active := s.Active
		if active == nil {
			active = []fakes.Finding{} // print [] rather than null
		}
		data, err := json.MarshalIndent(struct {
			Findings []fakes.Finding `json:"findings"`
		}{active}, "", "  ")
		if err != nil {
			fmt.Fprintf(os.Stderr, "fakestet: %v\n", err)
			return 1
		}
		fmt.Println(string(data))
	case fakes.OutputHuman:
		printHuman(s.Active)
	case fakes.OutputText:
		fmt.Println("review: see findings below")
		printHuman(s.Active)
	default:
		fmt.Fprintf(os.Stderr, "fakestet: unknown scenario output %q\n", mode)
		return fakes.ExitBadScenario
	}
	if len(s.Active) > 0 {
		return sc.RunExitOnFindings
	}
	return 0
}

func wantsJSON(args []string) bool {
	for i, a := range args {
		if a == "--output=json" || (a == "--output" && i+1 < len(args) && args[i+1] == "json") {
			return true
		}
	}
	return false
}

func printHuman(findings []fakes.Finding) {
	for _, f := range findings {
		fmt.Printf("%s:%d [%s] %s (%s)\n", f.File, f.Line, f.Severity, f.Message, f.ID)
	}
	fmt.Printf("%d finding(s).\n", len(findings))
}
