// Command fakeagent stands in for the coding-agent CLI in tests: it records
// each call in $FAKE_AGENT_DIR/calls.jsonl and behaves as the scenario in
// $FAKE_AGENT_DIR/scenario.json says (see package peal/internal/testkit/fakes).
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"peal/internal/procs"
	"peal/internal/testkit/fakes"
)

func main() {
	if os.Getenv(fakes.GrandchildEnv) == "1" {
		grandchild()
		return
	}

	kind := cliKind()
	if kind != "" && subcommand(kind, os.Args[1:]) {
		return
	}

	phase := os.Getenv("PEAL_PHASE")
	if phase == "" {
		phase = "execute"
		if slices.Contains(os.Args[1:], "--plan") {
			phase = "plan"
		}
	}
	task := os.Getenv("PEAL_TASK_INDEX")

	dir := os.Getenv(fakes.AgentDirEnv)
	if dir == "" {
		fmt.Print(fakes.DefaultStdout(phase, task))
		return
	}

	scenario, err := fakes.ReadScenario(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakeagent: bad scenario: %v\n", err)
		os.Exit(fakes.ExitBadScenario)
	}

	// SIGTERM is held from before the call is recorded until the outcome
	// says what it does: a test that signals as soon as it sees the record
	// must never meet the fake before its answer to SIGTERM is in place.
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	call, err := fakes.RecordStart(dir, newCall(phase, task))
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakeagent: record start: %v\n", err)
		os.Exit(fakes.ExitFakeError)
	}

	prompt := call.Stdin
	if prompt == "" && len(os.Args) > 1 {
		prompt = os.Args[len(os.Args)-1]
	}
	out := scenario.Pick(phase, task, call.N).ForPrompt(prompt)
	onTerm(terms, out)
	var code int
	var written int64
	if kind == "" {
		code, written = perform(dir, phase, task, out, nil)
	} else {
		code, written = imitate(kind, dir, phase, task, out, &call)
	}

	call.Time = time.Now()
	call.Exit = code
	call.StdoutBytes = written
	if err := fakes.RecordEnd(dir, call); err != nil {
		fmt.Fprintf(os.Stderr, "fakeagent: record end: %v\n", err)
		os.Exit(fakes.ExitFakeError)
	}
	os.Exit(code)
}

// onTerm gives SIGTERM, held since the start, the outcome's meaning: noted
// in TermFile and otherwise ignored, ignored, or (by default) the end of the
// fake, a SIGTERM that came while it was held included.
func onTerm(terms chan os.Signal, out fakes.Outcome) {
	switch {
	case out.IgnoreTerm && out.TermFile != "":
		go func() {
			for range terms {
				writeFile(out.TermFile, "term")
			}
		}()
	case out.IgnoreTerm:
		signal.Ignore(syscall.SIGTERM)
	default:
		signal.Reset(syscall.SIGTERM)
		select {
		case <-terms:
			syscall.Kill(os.Getpid(), syscall.SIGTERM)
		default:
		}
	}
}

// imitate answers a call the way the CLI kind would, then carries out the
// outcome.
func imitate(kind, dir, phase, task string, out fakes.Outcome, call *fakes.Call) (int, int64) {
	c := parseArgs(kind, os.Args[1:])
	if code, done := c.refuse(); done {
		return code, 0
	}
	if code, done := c.session(dir, phase, &out, call); done {
		return code, 0
	}
	if out.Failure != "" {
		return c.fail(out.Failure), 0
	}
	call.Denied = c.tools(out)
	code, written := perform(dir, phase, task, out, c.emitter(out, call.Session))
	if out.EventError != "" && code == 0 && c.structured() {
		code = 1
	}
	return code, written
}

func newCall(phase, task string) fakes.Call {
	c := fakes.Call{
		Kind:   cliKind(),
		TmpDir: os.Getenv("TMPDIR"),
		Key:    fakes.CallKey(phase, task),
		Phase:  phase,
		Task:   task,
		Argv:   os.Args[1:],
		Env:    map[string]string{},
		Time:   time.Now(),
	}
	self := procs.Self()
	c.PID, c.PIDNS, c.PIDStart = self.PID, self.NS, self.Start
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "PEAL_") {
			c.Env[k] = v
		}
	}
	c.Cwd, _ = os.Getwd()
	c.StdinNull = stdinIsNull()
	if !c.StdinNull {
		// A prompt on stdin: read it to the end, as the real CLIs do.
		data, _ := io.ReadAll(os.Stdin)
		c.Stdin = string(data)
	}
	return c
}

func stdinIsNull() bool {
	in, err := os.Stdin.Stat()
	if err != nil {
		return false
	}
	null, err := os.Stat(os.DevNull)
	if err != nil {
		return false
	}
	return os.SameFile(in, null)
}

// perform carries out out in the documented order and returns the exit code
// and the number of bytes written to stdout.
// emit, when set, writes the answer text in place of a plain write to stdout.
func perform(dir, phase, task string, out fakes.Outcome, emit func(string) (int64, error)) (code int, written int64) {
	fail := func(format string, args ...any) (int, int64) {
		fmt.Fprintf(os.Stderr, "fakeagent: "+format+"\n", args...)
		return fakes.ExitFakeError, written
	}

	if out.Grandchild || out.Daemon {
		if err := startGrandchild(out.GrandchildIgnoreTerm, out.Daemon); err != nil {
			return fail("grandchild: %v", err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(out.WriteFiles)) {
		if err := writeFile(name, out.WriteFiles[name]); err != nil {
			return fail("write_files: %v", err)
		}
	}
	for _, name := range out.RemoveFiles {
		if err := os.Remove(name); err != nil {
			return fail("remove_files: %v", err)
		}
	}
	if out.WaitFile != "" {
		if err := waitFile(out.WaitFile); err != nil {
			return fail("wait_file: %v", err)
		}
	}
	if len(out.Plant) > 0 {
		if err := fakes.Plant(".", out.Plant); err != nil {
			return fail("plant: %v", err)
		}
	}
	if out.StetFix != 0 {
		if _, err := fakes.Fix(".", out.StetFix); err != nil {
			return fail("stet_fix: %v", err)
		}
	}
	if out.StdoutMiB > 0 {
		n, err := writeMiB(os.Stdout, out.StdoutMiB)
		written += n
		if err != nil {
			return fail("stdout_mib: %v", err)
		}
	}
	for i := range out.ChatterCount {
		time.Sleep(time.Duration(out.ChatterMS) * time.Millisecond)
		fmt.Fprintf(os.Stderr, "fake chatter %d/%d\n", i+1, out.ChatterCount)
	}
	if !out.NoStdout {
		text := out.Stdout
		if text == "" {
			text = fakes.DefaultStdout(phase, task)
		}
		if emit == nil {
			emit = func(t string) (int64, error) {
				n, err := io.WriteString(os.Stdout, t)
				return int64(n), err
			}
		}
		n, err := emit(text)
		written += n
		if err != nil {
			return fail("stdout: %v", err)
		}
	}
	if out.Stderr != "" {
		fmt.Fprint(os.Stderr, out.Stderr)
	}
	if out.SleepMS > 0 {
		time.Sleep(time.Duration(out.SleepMS) * time.Millisecond)
	}
	if out.Hang {
		forever()
	}
	return out.Exit, written
}

func writeFile(name, content string) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	return os.WriteFile(name, []byte(content), 0o644)
}

// waitFile reads name to EOF; on a named pipe that blocks until the test has
// opened it for writing and closed it again.
func waitFile(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(io.Discard, f)
	return err
}

// writeMiB writes n MiB of 'x' lines in 1 MiB chunks, each chunk being 1024
// lines of 1023 'x' and a newline so the total is exactly n<<20 bytes.
func writeMiB(w io.Writer, n int) (int64, error) {
	line := strings.Repeat("x", 1023) + "\n"
	chunk := []byte(strings.Repeat(line, 1024))
	var total int64
	for range n {
		m, err := w.Write(chunk)
		total += int64(m)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// startGrandchild re-executes this program as a grandchild that shares
// stdout and stderr and the process group (or, as a daemon, neither: a
// session of its own), and returns once the grandchild has recorded its pid
// and said so on a private pipe.
func startGrandchild(ignoreTerm, daemon bool) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(exe)
	ign := "0"
	if ignoreTerm {
		ign = "1"
	}
	cmd.Env = append(os.Environ(), fakes.GrandchildEnv+"=1", fakes.GrandchildIgnoreTermEnv+"="+ign)
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = []*os.File{w} // fd 3 in the grandchild
	if daemon {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		cmd.Stdout, cmd.Stderr = nil, nil // a daemon lets go of the output too
	}
	err = cmd.Start()
	w.Close() // only the grandchild may hold the write end, so EOF means it died
	if err != nil {
		return err
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if line != "ready\n" {
		if err == nil || errors.Is(err, io.EOF) {
			err = fmt.Errorf("grandchild %d did not report ready (got %q)", cmd.Process.Pid, line)
		}
		return err
	}
	// The grandchild is deliberately left running and unwaited.
	return cmd.Process.Release()
}

// grandchild records its pid, reports ready on fd 3 and then sleeps until
// killed, holding the inherited stdout and stderr open.
func grandchild() {
	if os.Getenv(fakes.GrandchildIgnoreTermEnv) == "1" {
		signal.Ignore(syscall.SIGTERM)
	}
	if dir := os.Getenv(fakes.AgentDirEnv); dir != "" {
		if err := fakes.AppendGrandchildPID(dir, procs.Self()); err != nil {
			fmt.Fprintf(os.Stderr, "fakeagent grandchild: %v\n", err)
			os.Exit(fakes.ExitFakeError)
		}
	}
	ready := os.NewFile(3, "ready")
	if ready != nil {
		fmt.Fprint(ready, "ready\n")
		ready.Close()
	}
	forever()
}

// forever blocks until the process is killed; a sleeping loop keeps the Go
// runtime from declaring a deadlock.
func forever() {
	for {
		time.Sleep(time.Hour)
	}
}
