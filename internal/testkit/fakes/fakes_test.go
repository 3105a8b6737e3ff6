package fakes

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"peal/internal/procs"
	"peal/internal/testkit/testbin"
	"peal/internal/testkit/testgit"
)

var agentBin, stetBin string

// TestMain builds both fakes once for the whole package, since building per
// test would dominate the run time.
func TestMain(m *testing.M) {
	os.Exit(testbin.Main(m, func(b map[string]string) { agentBin, stetBin = b["fakeagent"], b["fakestet"] }, "peal/testdata/fakeagent", "peal/testdata/fakestet"))
}

// cleanEnv is the test's environment without PEAL_ and FAKE_ variables, so
// the developer's shell cannot leak into the fakes, plus extra.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PEAL_") && !strings.HasPrefix(kv, "FAKE_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

type result struct {
	stdout, stderr string
	exit           int
}

func runCmd(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = &stderr
	}
	// A stray process holding a pipe must fail the test, not hang it.
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("run %v: %v", cmd.Args, err)
	}
	return result{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}
}

func agentCmd(dir string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(agentBin, args...)
	cmd.Env = cleanEnv(append([]string{AgentDirEnv + "=" + dir}, env...)...)
	return cmd
}

func runAgent(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	return runCmd(t, agentCmd(dir, env, args...))
}

func mustCalls(t *testing.T, dir string) []Call {
	t.Helper()
	calls, err := ReadCalls(dir)
	if err != nil {
		t.Fatal(err)
	}
	return calls
}

func TestPick(t *testing.T) {
	fail := Outcome{Exit: 1}
	ok := Outcome{Stdout: "ok"}
	def := Outcome{Stdout: "default"}
	s := Scenario{
		Default: def,
		Rules: map[string][]Outcome{
			"execute":   {fail, fail, ok},
			"execute:2": {ok},
			"plan:1":    {fail},
			"review":    {},
		},
	}
	tests := []struct {
		phase, task string
		n           int
		want        Outcome
	}{
		{"execute", "1", 1, fail},
		{"execute", "1", 2, fail},
		{"execute", "1", 3, ok},
		{"execute", "1", 99, ok},
		{"execute", "1", 0, fail},
		{"execute", "2", 1, ok}, // phase:task beats phase
		{"plan", "1", 5, fail},  // a one-element list repeats forever
		{"plan", "2", 1, def},
		{"review", "1", 1, def}, // an empty list falls through
		{"other", "", 1, def},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s:%s#%d", tt.phase, tt.task, tt.n), func(t *testing.T) {
			got := s.Pick(tt.phase, tt.task, tt.n)
			if got.Exit != tt.want.Exit || got.Stdout != tt.want.Stdout {
				t.Errorf("Pick = %+v, want %+v", got, tt.want)
			}
		})
	}

	var zero Scenario
	if got := zero.Pick("plan", "1", 1); got.Exit != 0 || got.Stdout != "" {
		t.Errorf("zero scenario Pick = %+v", got)
	}
}

// An agent whose outcome writes files only when shown a text writes them
// when its prompt (last argument or stdin) holds the text, and not
// otherwise.
func TestAgentWritesWhenPromptHolds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	work := t.TempDir()
	if err := WriteScenario(dir, Scenario{Default: Outcome{WriteFiles: map[string]string{"always.txt": "a"},
		WhenPrompt: &PromptWrites{Contains: "FAIL: TestX", WriteFiles: map[string]string{"fix.txt": "fixed"}}}}); err != nil {
		t.Fatal(err)
	}
	run := func(prompt string, stdin bool) {
		args := []string{"--print", prompt}
		cmd := agentCmd(dir, nil, args...)
		if stdin {
			cmd = agentCmd(dir, nil, "--print")
			cmd.Stdin = strings.NewReader(prompt)
		}
		cmd.Dir = work
		if r := runCmd(t, cmd); r.exit != 0 {
			t.Fatalf("exit %d: %s", r.exit, r.stderr)
		}
	}
	run("fix the build", false)
	if _, err := os.Stat(filepath.Join(work, "fix.txt")); err == nil {
		t.Fatal("the fix was written for a prompt without the text")
	}
	run("output:\n--- FAIL: TestX (0.00s)", true)
	if data, err := os.ReadFile(filepath.Join(work, "fix.txt")); err != nil || string(data) != "fixed" {
		t.Fatalf("fix.txt: %q, %v", data, err)
	}
	os.Remove(filepath.Join(work, "fix.txt"))
	run("see FAIL: TestX above", false)
	if _, err := os.Stat(filepath.Join(work, "fix.txt")); err != nil {
		t.Fatal("the fix was not written for a prompt argument with the text")
	}
}

func TestStetPick(t *testing.T) {
	s := StetScenario{Rules: map[string][]Outcome{"run": {{Exit: 5}, {}}}}
	if _, ok := s.Pick("start", 1); ok {
		t.Error("start has no rules but Pick found one")
	}
	for n, want := range map[int]int{1: 5, 2: 0, 7: 0} {
		if out, ok := s.Pick("run", n); !ok || out.Exit != want {
			t.Errorf("Pick(run, %d) = %+v, %v; want exit %d", n, out, ok, want)
		}
	}
}

func TestCompareIDs(t *testing.T) {
	ids := []string{"F10", "F2", "F1", "B3", "F02", "F", "F1a"}
	slices.SortFunc(ids, compareIDs)
	want := []string{"B3", "F", "F1", "F1a", "F02", "F2", "F10"}
	if !slices.Equal(ids, want) {
		t.Errorf("sorted = %v, want %v", ids, want)
	}
}

func TestAgentWithoutDir(t *testing.T) {
	cmd := exec.Command(agentBin, "--plan")
	cmd.Env = cleanEnv("PEAL_TASK_INDEX=4")
	r := runCmd(t, cmd)
	if r.exit != 0 || r.stdout != "fake plan output for task 4\n" {
		t.Errorf("got %+v", r)
	}
}

func TestAgentBadScenario(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ScenarioFile), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runAgent(t, dir, nil)
	if r.exit != ExitBadScenario || r.stderr == "" {
		t.Errorf("got %+v, want exit %d with a message", r, ExitBadScenario)
	}
	if calls := mustCalls(t, dir); len(calls) != 0 {
		t.Errorf("recorded %d calls for a bad scenario", len(calls))
	}
}

func TestAgentRecords(t *testing.T) {
	dir := t.TempDir()
	work := t.TempDir()

	first := agentCmd(dir, []string{"PEAL_PHASE=plan", "PEAL_TASK_INDEX=1", "PEAL_RUN_ID=r1", "OTHER=x"}, "-p", "hello")
	first.Dir = work
	if r := runCmd(t, first); r.exit != 0 {
		t.Fatalf("first call: %+v", r)
	}

	second := agentCmd(dir, []string{"PEAL_TASK_INDEX=1"}, "--plan")
	second.Stdin = strings.NewReader("") // a pipe, not the null device
	if r := runCmd(t, second); r.exit != 0 {
		t.Fatalf("second call: %+v", r)
	}

	if r := runAgent(t, dir, []string{"PEAL_TASK_INDEX=2"}); r.exit != 0 {
		t.Fatalf("third call: %+v", r)
	}
	if r := runAgent(t, dir, nil); r.exit != 0 {
		t.Fatalf("fourth call: %+v", r)
	}

	calls := mustCalls(t, dir)
	if got, want := Keys(calls), []string{"plan:1", "plan:1", "execute:2", "execute"}; !slices.Equal(got, want) {
		t.Fatalf("Keys = %v, want %v", got, want)
	}
	starts, ends := Starts(calls), Ends(calls)
	if len(starts) != 4 || len(ends) != 4 {
		t.Fatalf("got %d starts and %d ends, want 4 each", len(starts), len(ends))
	}
	for i, c := range calls {
		want := EventStart
		if i%2 == 1 {
			want = EventEnd
		}
		if c.Event != want {
			t.Errorf("record %d event %q, want %q (start and end alternate for sequential calls)", i, c.Event, want)
		}
	}

	s1, s2 := starts[0], starts[1]
	if s1.N != 1 || s2.N != 2 || starts[2].N != 1 || starts[3].N != 1 {
		t.Errorf("N = %d,%d,%d,%d; want 1,2,1,1", s1.N, s2.N, starts[2].N, starts[3].N)
	}
	if s1.Phase != "plan" || s1.Task != "1" || starts[3].Phase != "execute" || starts[3].Task != "" {
		t.Errorf("phase/task wrong: %+v / %+v", s1, starts[3])
	}
	if !slices.Equal(s1.Argv, []string{"-p", "hello"}) || !slices.Equal(s2.Argv, []string{"--plan"}) {
		t.Errorf("argv = %q, %q", s1.Argv, s2.Argv)
	}
	wantEnv := map[string]string{"PEAL_PHASE": "plan", "PEAL_TASK_INDEX": "1", "PEAL_RUN_ID": "r1"}
	if len(s1.Env) != len(wantEnv) {
		t.Errorf("env = %v, want %v", s1.Env, wantEnv)
	}
	for k, v := range wantEnv {
		if s1.Env[k] != v {
			t.Errorf("env[%s] = %q, want %q", k, s1.Env[k], v)
		}
	}
	if s1.Cwd != work {
		t.Errorf("cwd = %q, want %q", s1.Cwd, work)
	}
	if !s1.StdinNull || s2.StdinNull {
		t.Errorf("stdin_null = %v, %v; want true, false", s1.StdinNull, s2.StdinNull)
	}
	if s1.PID <= 0 || s1.PID == s2.PID || s1.Time.IsZero() {
		t.Errorf("pid/time not recorded: %+v", s1)
	}
	e1 := ends[0]
	if e1.Key != "plan:1" || e1.N != 1 || e1.Exit != 0 || e1.StdoutBytes != int64(len("fake plan output for task 1\n")) {
		t.Errorf("end record = %+v", e1)
	}
	if e1.Time.Before(s1.Time) {
		t.Errorf("end time %v before start %v", e1.Time, s1.Time)
	}
}

func TestAgentOutcomes(t *testing.T) {
	tests := []struct {
		name       string
		out        Outcome
		wantStdout string
		wantStderr string
		wantExit   int
		wantFiles  map[string]string
	}{
		{name: "default", wantStdout: "fake execute output for task 3\n"},
		{name: "stdout", out: Outcome{Stdout: "PLAN\nstep 1\n"}, wantStdout: "PLAN\nstep 1\n"},
		{name: "no stdout", out: Outcome{NoStdout: true}},
		{name: "stderr and exit", out: Outcome{Stderr: "boom\n", Exit: 3, NoStdout: true}, wantStderr: "boom\n", wantExit: 3},
		{
			name:       "write files",
			out:        Outcome{WriteFiles: map[string]string{"a.txt": "A", "sub/dir/b.go": "package b\n"}, Stdout: "done\n"},
			wantStdout: "done\n",
			wantFiles:  map[string]string{"a.txt": "A", "sub/dir/b.go": "package b\n"},
		},
		{
			name:       "chatter",
			out:        Outcome{ChatterMS: 1, ChatterCount: 3, NoStdout: true},
			wantStderr: "fake chatter 1/3\nfake chatter 2/3\nfake chatter 3/3\n",
		},
		{name: "sleep", out: Outcome{SleepMS: 20, Stdout: "late\n"}, wantStdout: "late\n"},
		{
			// The file exists only because write_files comes first.
			name:       "wait file after write files",
			out:        Outcome{WriteFiles: map[string]string{"gate": "open"}, WaitFile: "gate", Stdout: "through\n"},
			wantStdout: "through\n",
			wantFiles:  map[string]string{"gate": "open"},
		},
		{
			name:       "wait file missing",
			out:        Outcome{WaitFile: "missing", Stdout: "never\n"},
			wantStderr: "fakeagent: wait_file: open missing: no such file or directory\n",
			wantExit:   ExitFakeError,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, work := t.TempDir(), t.TempDir()
			if err := WriteScenario(dir, Scenario{Default: tt.out}); err != nil {
				t.Fatal(err)
			}
			cmd := agentCmd(dir, []string{"PEAL_TASK_INDEX=3"})
			cmd.Dir = work
			r := runCmd(t, cmd)
			if r.stdout != tt.wantStdout || r.stderr != tt.wantStderr || r.exit != tt.wantExit {
				t.Errorf("got stdout %q stderr %q exit %d; want %q %q %d",
					r.stdout, r.stderr, r.exit, tt.wantStdout, tt.wantStderr, tt.wantExit)
			}
			for name, want := range tt.wantFiles {
				got, err := os.ReadFile(filepath.Join(work, name))
				if err != nil || string(got) != want {
					t.Errorf("file %s = %q, %v; want %q", name, got, err, want)
				}
			}
			ends := Ends(mustCalls(t, dir))
			if len(ends) != 1 || ends[0].Exit != tt.wantExit || ends[0].StdoutBytes != int64(len(tt.wantStdout)) {
				t.Errorf("end records = %+v", ends)
			}
		})
	}
}

// within runs f in the background and fails the test if it has not
// returned by a deadline that only guards against a hang.
func within(t *testing.T, what string, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: no progress in 60 s", what)
	}
}

// TestAgentWaitFileGate: on a named pipe, wait_file holds the agent after
// write_files until the test has opened the pipe for writing and closed it,
// and the agent reads everything written before it goes on.
func TestAgentWaitFileGate(t *testing.T) {
	dir, pipes := t.TempDir(), t.TempDir()
	ready, gate := filepath.Join(pipes, "ready"), filepath.Join(pipes, "gate")
	for _, p := range []string{ready, gate} {
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := Outcome{WriteFiles: map[string]string{ready: "x"}, WaitFile: gate, Stdout: "released\n"}
	if err := WriteScenario(dir, Scenario{Default: out}); err != nil {
		t.Fatal(err)
	}
	cmd := agentCmd(dir, nil)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	// A failing test must not leave the agent blocked on its gate.
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})

	within(t, "ready signal", func() error {
		_, err := os.ReadFile(ready)
		return err
	})
	var released time.Time
	within(t, "open the gate", func() error {
		// Opening for writing returns once the agent has opened the gate.
		f, err := os.OpenFile(gate, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		// More than a pipe buffer holds: the agent must read it all.
		if _, err := f.Write(make([]byte, 256<<10)); err != nil {
			f.Close()
			return err
		}
		released = time.Now()
		return f.Close()
	})
	within(t, "agent exit", func() error {
		<-exited
		return waitErr
	})
	if stdout.String() != "released\n" {
		t.Errorf("stdout %q", stdout.String())
	}
	ends := Ends(mustCalls(t, dir))
	if len(ends) != 1 || ends[0].Exit != 0 || !ends[0].Time.After(released) {
		t.Errorf("end records = %+v; want one, exit 0, after the gate opened at %v", ends, released)
	}
}

func TestAgentRuleSequence(t *testing.T) {
	dir := t.TempDir()
	fail := Outcome{Exit: 1, Stderr: "fail\n"}
	err := WriteScenario(dir, Scenario{
		Default: Outcome{Stdout: "other\n"},
		Rules: map[string][]Outcome{
			"execute:1": {fail, fail, {Stdout: "ok\n"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var exits []int
	for range 4 {
		exits = append(exits, runAgent(t, dir, []string{"PEAL_TASK_INDEX=1"}).exit)
	}
	if r := runAgent(t, dir, []string{"PEAL_TASK_INDEX=2"}); r.stdout != "other\n" {
		t.Errorf("task 2 stdout %q, want the default", r.stdout)
	}
	if !slices.Equal(exits, []int{1, 1, 0, 0}) {
		t.Errorf("exits = %v, want [1 1 0 0]", exits)
	}
}

func TestAgentStdoutMiB(t *testing.T) {
	dir := t.TempDir()
	if err := WriteScenario(dir, Scenario{Default: Outcome{StdoutMiB: 3, NoStdout: true}}); err != nil {
		t.Fatal(err)
	}
	cmd := agentCmd(dir, nil)
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var n int64
	var bad bool
	buf := make([]byte, 64<<10)
	for {
		m, err := pipe.Read(buf)
		n += int64(m)
		if len(bytes.Trim(buf[:m], "x\n")) > 0 {
			bad = true
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if n != 3<<20 || bad {
		t.Errorf("read %d bytes (only x and newline: %v), want exactly %d", n, !bad, 3<<20)
	}
	ends := Ends(mustCalls(t, dir))
	if len(ends) != 1 || ends[0].StdoutBytes != 3<<20 {
		t.Errorf("end records = %+v, want stdout_bytes %d", ends, 3<<20)
	}
}

// sigIgnored reports whether pid ignores sig according to /proc.
func sigIgnored(t *testing.T, pid int, sig syscall.Signal) bool {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if hex, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return mask&(1<<(uint(sig)-1)) != 0
		}
	}
	t.Fatalf("no SigIgn line for %d", pid)
	return false
}

func TestAgentGrandchild(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignore_term=%v", ignore), func(t *testing.T) {
			dir := t.TempDir()
			if err := WriteScenario(dir, Scenario{Default: Outcome{Grandchild: true, GrandchildIgnoreTerm: ignore, Stdout: "parent done\n"}}); err != nil {
				t.Fatal(err)
			}
			// Files rather than pipes, because the grandchild keeps the
			// inherited stdout and stderr open and a pipe would never reach EOF.
			out, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			errOut, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
			if err != nil {
				t.Fatal(err)
			}
			defer errOut.Close()
			cmd := agentCmd(dir, nil)
			cmd.Stdout = out
			cmd.Stderr = errOut
			r := runCmd(t, cmd)
			// Kill whatever was recorded, even if the assertions below fail.
			pids, err := GrandchildPIDs(dir)
			t.Cleanup(func() {
				for _, id := range pids {
					id.Kill()
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if r.exit != 0 {
				t.Fatalf("agent: %+v", r)
			}
			if len(pids) != 1 {
				t.Fatalf("grandchild pids = %v, want one", pids)
			}
			gc := pids[0].Host()
			if gc == cmd.Process.Pid || !procs.Alive(gc) {
				t.Errorf("grandchild %d not alive after agent %d exited", gc, cmd.Process.Pid)
			}
			if got := sigIgnored(t, gc, syscall.SIGTERM); got != ignore {
				t.Errorf("grandchild ignores SIGTERM = %v, want %v", got, ignore)
			}
			gcPgid, err := syscall.Getpgid(gc)
			if err != nil {
				t.Fatal(err)
			}
			if testPgid := syscall.Getpgrp(); gcPgid != testPgid {
				// The agent ran in the test's group, so the grandchild must too.
				t.Errorf("grandchild pgid %d, want %d", gcPgid, testPgid)
			}
			data, err := os.ReadFile(out.Name())
			if err != nil || string(data) != "parent done\n" {
				t.Errorf("stdout file = %q, %v", data, err)
			}
		})
	}
}

// startAndWaitLine starts cmd and returns once it has printed a first line
// on stdout, which the agent does only after its signal setup.
func startAndWaitLine(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(pipe).ReadString('\n')
	if err != nil {
		t.Fatalf("reading first line: %v", err)
	}
	return line
}

func TestAgentHang(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignore_term=%v", ignore), func(t *testing.T) {
			dir := t.TempDir()
			if err := WriteScenario(dir, Scenario{Default: Outcome{Hang: true, IgnoreTerm: ignore, Stdout: "hanging\n"}}); err != nil {
				t.Fatal(err)
			}
			cmd := agentCmd(dir, nil)
			if line := startAndWaitLine(t, cmd); line != "hanging\n" {
				t.Fatalf("first line %q", line)
			}
			if got := sigIgnored(t, cmd.Process.Pid, syscall.SIGTERM); got != ignore {
				t.Errorf("agent ignores SIGTERM = %v, want %v", got, ignore)
			}
			sig := syscall.SIGTERM
			if ignore {
				sig = syscall.SIGKILL
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if !ws.Signaled() || ws.Signal() != sig {
				t.Errorf("wait status %v, want killed by %v", ws, sig)
			}
			calls := mustCalls(t, dir)
			if len(Starts(calls)) != 1 || len(Ends(calls)) != 0 {
				t.Errorf("records = %+v, want one start and no end", calls)
			}
		})
	}
}

func TestAgentConcurrent(t *testing.T) {
	dir := t.TempDir()
	const n = 10
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			cmd := agentCmd(dir, []string{"PEAL_PHASE=execute", "PEAL_TASK_INDEX=7"})
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("%v: %s", err, out)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	calls := mustCalls(t, dir)
	var ns []int
	for _, c := range Starts(calls) {
		if c.Key != "execute:7" {
			t.Errorf("key %q", c.Key)
		}
		ns = append(ns, c.N)
	}
	slices.Sort(ns)
	if want := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}; !slices.Equal(ns, want) {
		t.Errorf("N values = %v, want %v", ns, want)
	}
	if len(Ends(calls)) != n {
		t.Errorf("%d end records, want %d", len(Ends(calls)), n)
	}
}

// stetRepo is a git repository with one commit and the fake stet's folders.
type stetRepo struct {
	t                        *testing.T
	repo, dir, state, wtRoot string
}

func newStetRepo(t *testing.T, scenario StetScenario) *stetRepo {
	t.Helper()
	tmp := t.TempDir()
	r := &stetRepo{t: t, repo: filepath.Join(tmp, "repo"), dir: filepath.Join(tmp, "fake"), state: filepath.Join(tmp, "state"), wtRoot: filepath.Join(tmp, "worktrees")}
	os.MkdirAll(r.repo, 0o755)
	os.MkdirAll(r.dir, 0o755)
	testgit.Init(t, r.repo)
	if err := WriteStetScenario(r.dir, scenario); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *stetRepo) git(args ...string) string {
	r.t.Helper()
	return testgit.Git(r.t, r.repo, args...)
}

func (r *stetRepo) commit(msg string) string {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "--allow-empty", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

// stet runs the fake stet in the repository with peal's variables.
func (r *stetRepo) stet(args ...string) result {
	r.t.Helper()
	cmd := exec.Command(stetBin, args...)
	cmd.Dir = r.repo
	cmd.Env = cleanEnv(StetDirEnv+"="+r.dir, "STET_STATE_DIR="+r.state, "STET_WORKTREE_ROOT="+r.wtRoot)
	return runCmd(r.t, cmd)
}

// want runs stet and checks its exit code and a text in its stderr.
func (r *stetRepo) want(exit int, stderr string, args ...string) result {
	r.t.Helper()
	res := r.stet(args...)
	if res.exit != exit || !strings.Contains(res.stderr, stderr) {
		r.t.Fatalf("stet %q: exit %d stderr %q; want exit %d and %q", args, res.exit, res.stderr, exit, stderr)
	}
	return res
}

// findings runs `stet run --output=json` and returns the ids it reports.
func (r *stetRepo) findings() []string {
	r.t.Helper()
	res := r.want(0, "", "run", "--output=json")
	var out struct{ Findings []Finding }
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil || out.Findings == nil {
		r.t.Fatalf("run output %q: %v", res.stdout, err)
	}
	ids := []string{}
	for _, f := range out.Findings {
		ids = append(ids, f.ID)
	}
	return ids
}

func (r *stetRepo) lastReviewed() []string {
	r.t.Helper()
	calls, err := ReadStetCalls(r.dir)
	if err != nil {
		r.t.Fatal(err)
	}
	ends := StetEnds(calls)
	return ends[len(ends)-1].Reviewed
}

// TestStetContract walks the fake stet through the real stet's contract:
// sessions at a commit, reviews of committed changes only, session-wide and
// incremental findings, dismissed hunks skipped, addressed findings dropped.
func TestStetContract(t *testing.T) {
	t.Parallel()
	r := newStetRepo(t, StetScenario{})
	r.want(1, `Could not resolve baseline ref "HEAD".`, "start")
	base := r.commit("root")
	os.WriteFile(filepath.Join(r.repo, "mine.txt"), []byte("x"), 0o644)
	r.want(1, "working tree has uncommitted changes", "start", base)
	r.want(0, "Warning: proceeding with uncommitted changes", "start", base, "--allow-dirty")
	r.want(0, "", "finish")
	r.want(1, "no active session", "finish")
	r.want(1, "no active session", "run", "--output=json")
	r.want(1, "No active session", "status")
	os.Remove(filepath.Join(r.repo, "mine.txt"))

	res := r.want(0, "Nothing to review (baseline is HEAD).", "start", base)
	if res.stdout != "0 finding(s).\n" {
		t.Fatalf("start printed %q", res.stdout)
	}
	r.want(0, "", "status")
	if _, ok, _ := ReadSession(r.state); !ok {
		t.Fatal("no session in STET_STATE_DIR")
	}
	if _, err := os.Stat(filepath.Join(r.repo, ".review")); err == nil {
		t.Fatal("stet wrote into the repository despite STET_STATE_DIR")
	}

	f1 := Finding{ID: "F001", Severity: "error", Message: "nil dereference", Suggestion: "check for nil"}
	if err := Plant(r.repo, []Finding{{ID: "F001", File: "a.go", Severity: "error", Message: "nil dereference", Suggestion: "check for nil"}}); err != nil {
		t.Fatal(err)
	}
	if got := r.findings(); len(got) != 0 {
		t.Fatalf("uncommitted work was reviewed: %v", got)
	}
	r.commit("task 1")
	res = r.want(0, "", "run", "--output=json")
	var out struct{ Findings []Finding }
	json.Unmarshal([]byte(res.stdout), &out)
	f1.File, f1.Line, f1.Category, f1.Confidence = "a.go", 2, "bug", 0.9
	if len(out.Findings) != 1 || out.Findings[0] != f1 {
		t.Fatalf("findings %+v, want %+v", out.Findings, f1)
	}

	Plant(r.repo, []Finding{{ID: "F002", File: "b.go", Message: "unused"}})
	r.commit("task 2")
	if got := r.findings(); !slices.Equal(got, []string{"F001", "F002"}) {
		t.Fatalf("findings %v, want the whole session's", got)
	}
	if got := r.lastReviewed(); !slices.Equal(got, []string{"b.go:1"}) {
		t.Fatalf("reviewed %v: the review is not incremental", got)
	}

	r.want(1, "Invalid reason", "dismiss", "F002", "because")
	r.want(1, "no finding", "dismiss", "F009", "false_positive")
	r.want(1, "at least 4 characters", "dismiss", "F00", "false_positive")
	r.want(0, "", "dismiss", "F002", "false_positive")
	if got := r.findings(); !slices.Equal(got, []string{"F001"}) {
		t.Fatalf("after dismissing F002: %v", got)
	}
	// A change in the hunk of a dismissed finding is not reviewed again.
	Plant(r.repo, []Finding{{ID: "F003", File: "b.go", Message: "shadowed"}})
	r.commit("task 3")
	if got := r.findings(); !slices.Equal(got, []string{"F001"}) || len(r.lastReviewed()) != 0 {
		t.Fatalf("the hunk of a dismissed finding was reviewed: %v, %v", got, r.lastReviewed())
	}
	// Removing F1's line and committing addresses it.
	if ids, err := Fix(r.repo, 1); err != nil || !slices.Equal(ids, []string{"F001"}) {
		t.Fatalf("fix: %v %v", ids, err)
	}
	if got := r.findings(); !slices.Equal(got, []string{"F001"}) {
		t.Fatalf("an uncommitted fix counted: %v", got)
	}
	r.commit("fix")
	if got := r.findings(); len(got) != 0 {
		t.Fatalf("after the committed fix: %v", got)
	}
	r.want(0, "", "finish")
	if _, ok, _ := ReadSession(r.state); ok {
		t.Fatal("finish left the session")
	}
	if got := r.git("status", "--porcelain"); got != "" {
		t.Fatalf("stet left files in the repository: %q", got)
	}
}

// TestStetStartAtOlderCommit: a session at a commit before HEAD gets a
// worktree and reviews at once; worktrees outlive a session that was not
// finished until cleanup removes them.
func TestStetStartAtOlderCommit(t *testing.T) {
	t.Parallel()
	r := newStetRepo(t, StetScenario{})
	base := r.commit("root")
	Plant(r.repo, []Finding{{ID: "F1", File: "a.go", Message: "m"}})
	r.commit("work")
	res := r.want(0, "", "start", base, "--output=json")
	if !strings.Contains(res.stdout, `"id":"F1"`) {
		t.Fatalf("start did not review baseline..HEAD: %q", res.stdout)
	}
	wt := filepath.Join(r.wtRoot, "stet-"+base[:12])
	if _, err := os.Stat(wt); err != nil {
		t.Fatalf("no worktree under STET_WORKTREE_ROOT: %v", err)
	}
	r.want(1, "worktree already exists", "start", base)
	r.want(0, "No orphan worktrees.", "cleanup")
	// A crash leaves the worktree without its session: cleanup removes it.
	os.Remove(filepath.Join(r.state, SessionFile))
	r.want(0, "Removed worktree: "+wt, "cleanup")
	if _, err := os.Stat(wt); err == nil {
		t.Fatal("cleanup left the worktree")
	}
	r.want(0, "", "start", base)
	r.want(0, "", "finish")
	if _, err := os.Stat(wt); err == nil {
		t.Fatal("finish left the worktree")
	}
	side := r.git("commit-tree", "HEAD^{tree}", "-m", "side")
	r.want(1, "baseline ref is not an ancestor of HEAD", "start", side)
}

// TestStetStreamAndModel: --stream prints progress and finding events and no
// findings document; an unreachable model fails a review that has something
// to review with exit 2, and a review with nothing new succeeds without it.
func TestStetStreamAndModel(t *testing.T) {
	t.Parallel()
	r := newStetRepo(t, StetScenario{})
	base := r.commit("root")
	r.want(0, "", "start", base)
	Plant(r.repo, []Finding{{ID: "F1", File: "a.go", Message: "m"}, {ID: "F2", File: "b.go", Message: "n"}})
	r.commit("work")
	r.want(1, "--stream requires --output=json", "run", "--stream")
	res := r.want(0, "", "run", "--output=json", "--stream")
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
		var ev struct{ Type, Msg string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not NDJSON: %q", res.stdout)
		}
		types = append(types, ev.Type+":"+ev.Msg)
	}
	want := []string{"progress:2 hunks to review", "progress:Reviewing hunk 1/2: a.go", "finding:", "progress:Reviewing hunk 2/2: b.go", "finding:", "done:"}
	if !slices.Equal(types, want) {
		t.Fatalf("events %q, want %q", types, want)
	}
	if got := r.findings(); !slices.Equal(got, []string{"F1", "F2"}) {
		t.Fatalf("findings after the streamed review: %v", got)
	}

	WriteStetScenario(r.dir, StetScenario{ModelDown: true})
	r.findings() // nothing new to review: the model is not needed
	Plant(r.repo, []Finding{{ID: "F3", File: "c.go", Message: "o"}})
	r.commit("more")
	r.want(2, "unreachable at", "run", "--output=json")
	WriteStetScenario(r.dir, StetScenario{ModelRefused: true})
	r.want(2, "LLM bad request at http://127.0.0.1:9/v1. openai chat: ollama bad request: HTTP 404", "run", "--output=json")
}

func TestStetRules(t *testing.T) {
	t.Parallel()
	r := newStetRepo(t, StetScenario{Rules: map[string][]Outcome{
		"run":   {{Exit: 5, Stderr: "boom\n"}, {Stdout: "not json\n"}, {}},
		"start": {{Stderr: "warming up\n"}},
	}})
	r.commit("root")
	if res := r.stet("start"); res.exit != 0 || !strings.HasPrefix(res.stderr, "warming up\n") {
		t.Errorf("start: %+v", res)
	}
	if res := r.stet("run", "--output=json"); res.exit != 5 || res.stdout != "" || res.stderr != "boom\n" {
		t.Errorf("run 1: %+v", res)
	}
	if res := r.stet("run", "--output=json"); res.exit != 0 || res.stdout != "not json\n" {
		t.Errorf("run 2: %+v", res)
	}
	if got := r.findings(); len(got) != 0 {
		t.Errorf("run 3: %v", got)
	}
	calls, _ := ReadStetCalls(r.dir)
	if got := StetCmds(calls); !slices.Equal(got, []string{"start", "run --output=json", "run --output=json", "run --output=json"}) {
		t.Errorf("StetCmds = %q", got)
	}
	if calls[0].Env["STET_STATE_DIR"] != r.state {
		t.Errorf("the start record lacks STET_STATE_DIR: %+v", calls[0].Env)
	}
	cmd := exec.Command(stetBin, "start")
	cmd.Env = cleanEnv()
	if res := runCmd(t, cmd); res.exit != ExitNoStetDir {
		t.Errorf("without %s: exit %d, want %d", StetDirEnv, res.exit, ExitNoStetDir)
	}
}

// TestAgentPlantAndFix: the fake agent plants findings in its working folder
// and removes them again, lowest ids first.
func TestAgentPlantAndFix(t *testing.T) {
	t.Parallel()
	work, agentDir := t.TempDir(), t.TempDir()
	err := WriteScenario(agentDir, Scenario{Rules: map[string][]Outcome{
		"execute": {{Plant: []Finding{{ID: "F10", File: "c.go", Message: "m10"}, {ID: "F2", File: "a.go", Message: "m2"}, {ID: "F3", File: "a.go", Message: "m3"}}},
			{StetFix: 1}, {StetFix: -1}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	planted := func() []string {
		t.Helper()
		var ids []string
		for _, name := range []string{"a.go", "c.go"} {
			data, _ := os.ReadFile(filepath.Join(work, name))
			for _, line := range strings.Split(string(data), "\n") {
				if f, ok := ParseMarker(line); ok {
					ids = append(ids, f.ID)
				}
			}
		}
		return ids
	}
	step := func() {
		t.Helper()
		cmd := agentCmd(agentDir, nil)
		cmd.Dir = work
		if res := runCmd(t, cmd); res.exit != 0 {
			t.Fatalf("agent: %+v", res)
		}
	}
	step()
	if got := planted(); !slices.Equal(got, []string{"F2", "F3", "F10"}) {
		t.Fatalf("planted %v", got)
	}
	step()
	if got := planted(); !slices.Equal(got, []string{"F3", "F10"}) {
		t.Errorf("after stet_fix=1: %v, want F2 (lowest id) removed", got)
	}
	step()
	if got := planted(); len(got) != 0 {
		t.Errorf("after stet_fix=-1: %v, want none", got)
	}
	if data, _ := os.ReadFile(filepath.Join(work, "a.go")); string(data) != "// a.go\n// fixed F2\n// fixed F3\n"+plantedTrailer+"\n" {
		t.Errorf("a.go after the fixes: %q", data)
	}
}

func TestMarkerLine(t *testing.T) {
	t.Parallel()
	f := Finding{ID: "F1", File: "x.go", Line: 4, Severity: "error", Message: "m", Suggestion: "s"}
	got, ok := ParseMarker("	x := 1 " + MarkerLine(f))
	f.File, f.Line = "", 0
	if !ok || got != f {
		t.Fatalf("round trip: %+v %v", got, ok)
	}
	if _, ok := ParseMarker("no marker here"); ok {
		t.Fatal("a line without a marker parsed")
	}
}
