package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"peal/internal/testkit/fakes"
)

// openPTY opens a pseudo-terminal pair, cols columns wide; it skips the test
// when the system has none.
func openPTY(t *testing.T, cols uint16) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: /dev/ptmx: %v", err)
	}
	fd := int(master.Fd())
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0)
	}
	if err == nil {
		slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	}
	if err != nil {
		master.Close()
		t.Skipf("no pseudo-terminal: %v", err)
	}
	if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: cols}); err != nil {
		t.Fatalf("TIOCSWINSZ: %v", err)
	}
	return master, slave
}

// onTerminal runs peal with its stderr on a pseudo-terminal and returns
// everything the terminal received.
func (s *sandbox) onTerminal(env []string, args ...string) (int, string) {
	s.t.Helper()
	return s.onTerminalAs(false, env, args...)
}

// onTerminalAs runs peal with its stderr, or with stdout, on a
// pseudo-terminal and returns everything the terminal received.
func (s *sandbox) onTerminalAs(stdout bool, env []string, args ...string) (int, string) {
	s.t.Helper()
	master, slave := openPTY(s.t, 120)
	defer master.Close()
	cmd := exec.Command(bins["peal"], args...)
	cmd.Dir, cmd.Env = s.dir, env
	cmd.Stdout, cmd.Stderr = io.Discard, slave
	if stdout {
		cmd.Stdout, cmd.Stderr = slave, io.Discard
	}
	if err := cmd.Start(); err != nil {
		slave.Close()
		s.t.Fatal(err)
	}
	// Only peal holds the terminal now: reading it ends (EIO) once peal and
	// its children are gone.
	slave.Close()
	var stream bytes.Buffer
	read := make(chan struct{})
	go func() {
		io.Copy(&stream, master)
		close(read)
	}()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case <-read:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		s.t.Fatal("peal did not finish")
	}
	if err := <-waited; err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			s.t.Fatal(err)
		}
	}
	return cmd.ProcessState.ExitCode(), stream.String()
}

// TestProgressOnTerminal runs the built peal with stderr on a pseudo-terminal
// and an agent that takes two seconds to plan: the status line of the call is
// drawn and redrawn in place, log lines stay whole, and no prompt text shows.
// TERM=dumb and --no-progress turn the display off.
func TestProgressOnTerminal(t *testing.T) {
	t.Parallel()
	const secret = "SECRET TASK TEXT"
	cases := []struct {
		name  string
		env   []string
		args  []string
		shown bool
	}{
		{"shown", []string{"TERM=xterm"}, nil, true},
		{"TERM=dumb", []string{"TERM=dumb"}, nil, false},
		{"TERM unset", nil, nil, false},
		{"--no-progress", []string{"TERM=xterm"}, []string{"--no-progress"}, false},
		{"logfmt on request", []string{"TERM=dumb", "PEAL_LOG_FORMAT=logfmt"}, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t, "## Task 1\n"+secret+"\n")
			s.scenario(map[string][]fakes.Outcome{"plan": {{SleepMS: 2000}}})
			// No network retries: the call has exactly one attempt.
			env := s.env(append([]string{"PEAL_NETWORK_RETRY_COUNT=0"}, tc.env...)...)
			code, stream := s.onTerminal(env, append([]string{"run"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d; terminal:\n%s", code, stream)
			}
			if strings.Contains(stream, secret) {
				t.Fatal("prompt text on the terminal")
			}
			if !tc.shown {
				if strings.Contains(stream, "\x1b[") || strings.Contains(stream, "peal: task") {
					t.Fatalf("status lines drawn:\n%q", stream)
				}
				want := "INFO  plan: starting call  attempt="
				if strings.Contains(tc.name, "logfmt") {
					want = `msg="starting call" phase=plan`
				}
				if !strings.Contains(stream, want) {
					t.Fatalf("log lines %q missing:\n%s", want, stream)
				}
				return
			}
			status := "peal: task 1/1 | plan | attempt 1 of 1 | primary | "
			if n := strings.Count(stream, status); n < 2 {
				t.Fatalf("the status line was drawn %d times, want it redrawn while the agent runs:\n%q", n, stream)
			}
			if !strings.Contains(stream, "peal: task 1/1 | execute | attempt 1 of 1 | primary | ") {
				t.Fatalf("no status line for execute:\n%q", stream)
			}
			if !strings.Contains(stream, "\r\x1b[1A\x1b[J") {
				t.Fatalf("no cursor-up and erase before a redraw:\n%q", stream)
			}
			// What the terminal shows at the end: every status line was
			// overwritten in place, and each log record is whole, on
			// lines that fit.
			screen := newScreen(t)
			screen.feed(stream)
			lines := screen.text()
			var records []string
			for _, line := range lines {
				// A person's line: the time, the level, the event, or the
				// rest of the record above it, indented under its event;
				// never wider than the terminal (120 columns).
				switch {
				case len([]rune(line)) > 119:
					t.Fatalf("line %q is wider than the terminal; screen:\n%s", line, strings.Join(lines, "\n"))
				case humanLine.MatchString(line):
					records = append(records, line)
				case len(records) > 0 && continued.MatchString(line):
					records[len(records)-1] += " " + strings.TrimSpace(line)
				default:
					t.Fatalf("line %q is no log line; screen:\n%s", line, strings.Join(lines, "\n"))
				}
			}
			starts := 0
			for _, rec := range records {
				if strings.Contains(rec, ": starting call") {
					starts++
					// The argv whole (a path longer than a line is broken
					// inside), and what follows it.
					if !strings.Contains(strings.ReplaceAll(rec, " ", ""), bins["fakeagent"]) || !strings.Contains(rec, " stdin_bytes=") {
						t.Fatalf("a starting call without its argv whole: %q", rec)
					}
				}
			}
			if starts != 2 {
				t.Fatalf("%d starting-call records on the screen, want 2:\n%s", starts, strings.Join(lines, "\n"))
			}
		})
	}
}

// humanLine is a log line for a person: the time, the level, the event.
var humanLine = regexp.MustCompile(`^\d\d:\d\d:\d\d (INFO |WARN |ERROR|DEBUG) \S`)

// continued is a line a log record goes on over, under its event.
var continued = regexp.MustCompile(`^ {15}\S`)

// TestNoProgressOnPipe: with stderr on a pipe (CI), the log is plain lines,
// even with a TERM that could draw.
func TestNoProgressOnPipe(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nA\n")
	s.scenario(map[string][]fakes.Outcome{"plan": {{SleepMS: 1500}}})
	r := s.peal(s.env("TERM=xterm"), "run")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if strings.ContainsAny(r.stderr, "\r\x1b") || strings.Contains(r.stderr, "peal: task") {
		t.Fatalf("terminal sequences or status lines on a pipe:\n%q", r.stderr)
	}
	for _, line := range strings.Split(strings.TrimRight(r.stderr, "\n"), "\n") {
		if !strings.HasPrefix(line, "time=") {
			t.Fatalf("not a plain log line: %q", line)
		}
	}
}

// TestTerminalDetection: the display is drawn on a terminal only, as wide as
// the terminal says.
func TestTerminalDetection(t *testing.T) {
	t.Parallel()
	master, slave := openPTY(t, 33)
	defer master.Close()
	defer slave.Close()
	p := progressFor(slave, []string{"TERM=xterm"}, false)
	if p == nil {
		t.Fatal("no display on a terminal")
	}
	p.Close()
	if w := p.width(); w != 33 {
		t.Fatalf("width %d, want 33", w)
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	if progressFor(devNull, []string{"TERM=xterm"}, false) != nil {
		t.Fatal("a display on /dev/null")
	}
}

// TestReportOnTerminal: `peal report` on a terminal is text for a person,
// without Markdown's escapes; on a pipe, or with --format markdown, it is
// the Markdown a CI job summary shows.
func TestReportOnTerminal(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nA\n## Task 2\nB\n")
	env := s.env()
	if r := s.peal(env, "run"); r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	code, screen := s.onTerminalAs(true, env, "report")
	screen = strings.ReplaceAll(screen, "\r\n", "\n")
	if code != 0 || !strings.HasPrefix(screen, "peal run: Exit code 0 after ") || !strings.Contains(screen, "\nTask  Result     Phases and attempts") ||
		strings.ContainsAny(screen, "\\|") || strings.Contains(screen, "run_summary.json") {
		t.Fatalf("exit %d, on a terminal:\n%s", code, screen)
	}
	if code, md := s.onTerminalAs(true, env, "report", "--format", "markdown"); code != 0 || !strings.HasPrefix(md, "## peal run") {
		t.Fatalf("--format markdown on a terminal: exit %d\n%s", code, md)
	}
	if r := s.peal(env, "report"); r.code != 0 || !strings.HasPrefix(r.stdout, "## peal run") {
		t.Fatalf("on a pipe: exit %d\n%s", r.code, r.stdout)
	}
}
