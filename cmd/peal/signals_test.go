package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"peal/confine"
	"peal/internal/procs"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
)

// startPeal starts `peal run` in the sandbox and returns it with a channel
// that closes when it has exited.
func startPeal(t *testing.T, s *sandbox, env []string, stderr *os.File) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command(bins["peal"], "run")
	cmd.Dir, cmd.Env, cmd.Stderr = s.dir, env, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	return cmd, done
}

// waitExited waits (a generous bound) for peal to exit.
func waitExited(t *testing.T, cmd *exec.Cmd, done <-chan struct{}, bound time.Duration) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(bound):
		cmd.Process.Kill()
		t.Fatalf("peal did not exit within %s", bound)
	}
}

// agentsGone fails the test when an agent of the sandbox is still alive.
func agentsGone(t *testing.T, s *sandbox) {
	t.Helper()
	calls, _ := fakes.ReadCalls(s.agentDir)
	ids, _ := fakes.GrandchildPIDs(s.agentDir)
	for _, c := range fakes.Starts(calls) {
		ids = append(ids, c.ID())
	}
	for _, id := range ids {
		if pid := id.Host(); procs.Alive(pid) {
			id.Kill()
			t.Fatalf("process %d (%v) outlived peal", pid, id)
		}
	}
}

func fifo(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A second interrupt stops at once: the agent that ignores SIGTERM is killed
// without waiting out a long kill grace, the state is saved, and the exit
// code is the first signal's.
func TestSecondSignalStopsAtOnce(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, plan3)
	ready, term := fifo(t, s.agentDir, "ready"), fifo(t, s.agentDir, "term")
	s.scenario(map[string][]fakes.Outcome{"execute:2": {{IgnoreTerm: true, TermFile: term, WriteFiles: map[string]string{ready: "x"}, Hang: true}}})
	var stderr bytes.Buffer
	r, w, _ := os.Pipe()
	go func() { stderr.ReadFrom(r) }()
	cmd, done := startPeal(t, s, s.env("PEAL_KILL_GRACE_SEC=600"), w)
	w.Close()
	if _, err := os.ReadFile(ready); err != nil { // the agent of task 2 runs
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGINT)
	// The agent ignores the SIGTERM of the first interrupt, so peal would wait
	// 600 s for the grace; the second interrupt ends that.
	if _, err := os.ReadFile(term); err != nil { // the agent got its SIGTERM
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGINT)
	waitExited(t, cmd, done, 30*time.Second)
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d, want 130", code)
	}
	if !slices.Equal(s.completed(), []int{1}) {
		t.Fatalf("state %v", s.completed())
	}
	agentsGone(t, s)
}

// When peal's stderr loses its reader (`peal run 2>&1 | tee`, tee killed),
// the next log line does not kill peal: the run stops as on a hangup, the
// agents are stopped, the state is saved, and the exit code is 141.
func TestLostStderrStopsTheRun(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, plan3)
	ready, gate := fifo(t, s.agentDir, "ready"), fifo(t, s.agentDir, "gate")
	s.scenario(map[string][]fakes.Outcome{
		"plan:2":    {{WriteFiles: map[string]string{ready: "x"}, WaitFile: gate}},
		"execute:2": {{Grandchild: true, Hang: true}},
	})
	r, w, _ := os.Pipe()
	cmd, done := startPeal(t, s, s.env("PEAL_KILL_GRACE_SEC=1"), w)
	w.Close()
	if _, err := os.ReadFile(ready); err != nil { // task 2's plan call runs
		t.Fatal(err)
	}
	r.Close()                                              // the reader goes away
	if err := os.WriteFile(gate, nil, 0o644); err != nil { // let the plan call finish: peal logs again
		t.Fatal(err)
	}
	waitExited(t, cmd, done, 60*time.Second)
	if code := cmd.ProcessState.ExitCode(); code != 141 {
		t.Fatalf("exit %d, want 141", code)
	}
	if !slices.Equal(s.completed(), []int{1}) {
		t.Fatalf("state %v", s.completed())
	}
	agentsGone(t, s)
}

// Killing peal with SIGKILL kills its agent too (the parent-death signal).
func TestAgentDiesWithKilledPeal(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, plan3)
	ready := fifo(t, s.agentDir, "ready")
	s.scenario(map[string][]fakes.Outcome{"execute:2": {{WriteFiles: map[string]string{ready: "x"}, Hang: true}}})
	cmd, done := startPeal(t, s, s.env(), nil)
	if _, err := os.ReadFile(ready); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	waitExited(t, cmd, done, 30*time.Second)
	calls, _ := fakes.ReadCalls(s.agentDir)
	starts := fakes.Starts(calls)
	agent := starts[len(starts)-1].ID().Host()
	waitPID(agent, 30*time.Second)
	if procs.Alive(agent) {
		syscall.Kill(agent, syscall.SIGKILL)
		t.Fatalf("agent %d outlived a killed peal", agent)
	}
	if !strings.Contains(strings.Join(fakes.Keys(starts), " "), "execute:2") {
		t.Fatalf("calls %v", fakes.Keys(starts))
	}
}

// A signal while a check runs (task 2's, after its execute) stops the check
// and what it started: SIGTERM saves the state and exits 143; SIGKILL leaves
// it to peal's guard. Nothing of a check outlives peal.
func TestSignalDuringACheck(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t, plan3)
			ready := fifo(t, s.agentDir, "ready")
			pidFile := filepath.Join(s.agentDir, "sleep.pid")
			check := fmt.Sprintf(`if [ -f go.txt ]; then sleep 300 & echo `+fakes.LastJobID+` > %q; echo x > %q; wait; fi`, pidFile, ready)
			s.scenario(map[string][]fakes.Outcome{"execute:2": {{WriteFiles: map[string]string{"go.txt": "1"}}}})
			cmd, done := startPeal(t, s, s.env("PEAL_CHECK_COMMANDS="+check), nil)
			if _, err := os.ReadFile(ready); err != nil {
				t.Fatal(err)
			}
			cmd.Process.Signal(sig)
			waitExited(t, cmd, done, 60*time.Second)
			data, _ := os.ReadFile(pidFile)
			id, err := procs.ParseID(string(data))
			if err != nil {
				t.Fatalf("no pid of the check's child: %v", err)
			}
			t.Cleanup(id.Kill)
			waitPID(id.Host(), 30*time.Second)
			if id.Alive() {
				t.Fatalf("the check's child %v outlived peal (%s)", id, sig)
			}
			if sig == syscall.SIGKILL {
				return
			}
			if code := cmd.ProcessState.ExitCode(); code != 143 {
				t.Fatalf("exit %d, want 143", code)
			}
			if !slices.Equal(s.completed(), []int{1}) {
				t.Fatalf("state %v", s.completed())
			}
		})
	}
}

// waitPID waits until process pid exits, at most d (on a pidfd: no polling).
func waitPID(pid int, d time.Duration) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(d.Milliseconds()))
}

// Killing peal with SIGKILL kills what its agent started too, in the
// agent's group or out of it (a daemon), before any other run: peal's guard
// does it as soon as peal is gone.
func TestGrandchildDiesWithKilledPeal(t *testing.T) {
	t.Parallel()
	for _, tc := range fakes.Leftovers() {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t, plan3)
			ready := fifo(t, s.agentDir, "ready")
			tc.Outcome.WriteFiles = map[string]string{ready: "x"} // once the grandchild runs
			s.scenario(map[string][]fakes.Outcome{"execute:2": {tc.Outcome}})
			cmd, done := startPeal(t, s, s.env(), nil)
			if _, err := os.ReadFile(ready); err != nil {
				t.Fatal(err)
			}
			cmd.Process.Signal(syscall.SIGKILL)
			waitExited(t, cmd, done, 30*time.Second)
			ids, err := fakes.GrandchildPIDs(s.agentDir)
			if err != nil || len(ids) != 1 {
				t.Fatalf("grandchildren %v, %v", ids, err)
			}
			t.Cleanup(ids[0].Kill)
			waitPID(ids[0].Host(), 30*time.Second)
			if ids[0].Alive() {
				t.Fatalf("%s %d outlived the killed peal", tc.Name, ids[0].Host())
			}
		})
	}
}

// guardOf returns the pid of the guard of peal pid (see phase's guard):
// peal's child whose environment names peal.
func guardOf(t *testing.T, peal int) int {
	t.Helper()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", peal))
	for _, f := range tasks {
		data, _ := os.ReadFile(f)
		for _, field := range strings.Fields(string(data)) {
			env, _ := os.ReadFile("/proc/" + field + "/environ")
			if slices.Contains(strings.Split(string(env), "\x00"), fmt.Sprintf("PEAL_GUARD_OF=%d", peal)) {
				pid, _ := strconv.Atoi(field)
				return pid
			}
		}
	}
	t.Fatalf("peal %d has no guard", peal)
	return 0
}

// What a killed peal's agent left outside its group (a daemon) does not
// outlive it, even when peal's guard could not stop it (here it was killed
// with peal, as a machine that ends a job's every process would). Confined,
// the call's PID namespace ends with its launcher, which ends with peal;
// unconfined, the next run on the same state folder stops the daemon before
// its first call.
func TestRerunStopsLeftoversOfAKilledRun(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"off", "on"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			if mode == "on" && !confine.Probe().PIDNamespace {
				t.Skip("no PID namespace for a call here")
			}
			s := newSandbox(t, plan3)
			env := s.env("PEAL_CONFINE=" + mode)
			ready := fifo(t, s.agentDir, "ready")
			s.scenario(map[string][]fakes.Outcome{"execute:2": {{Daemon: true, WriteFiles: map[string]string{ready: "x"}, Hang: true}, {}}})
			cmd, done := startPeal(t, s, env, nil)
			if _, err := os.ReadFile(ready); err != nil {
				t.Fatal(err)
			}
			syscall.Kill(guardOf(t, cmd.Process.Pid), syscall.SIGKILL)
			cmd.Process.Signal(syscall.SIGKILL)
			waitExited(t, cmd, done, 30*time.Second)
			daemons, err := fakes.GrandchildPIDs(s.agentDir)
			if err != nil || len(daemons) != 1 {
				t.Fatalf("daemons %v, %v", daemons, err)
			}
			t.Cleanup(daemons[0].Kill)
			if mode == "on" {
				waitPID(daemons[0].Host(), 30*time.Second)
				if daemons[0].Alive() {
					t.Fatalf("the confined daemon %v outlived the killed peal", daemons[0])
				}
			} else if !daemons[0].Alive() {
				t.Fatal("the daemon died with peal: the test proves nothing")
			}
			r := s.peal(env, "run")
			if r.code != 0 {
				t.Fatalf("re-run: exit %d: %s", r.code, r.stderr)
			}
			if daemons[0].Alive() {
				t.Fatalf("the killed run's daemon %d outlived the re-run", daemons[0].Host())
			}
			if said := strings.Contains(r.stderr, "earlier run on this state folder left running"); said != (mode == "off") {
				t.Fatalf("the re-run said it stopped what a killed run left: %v, want %v: %s", said, mode == "off", r.stderr)
			}
		})
	}
}

// The post-run commands of a run go on after it has released its state
// folder: the next run on the folder does not take them for what a killed
// run left.
func TestNextRunLeavesPostRunCommandsAlone(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nA\n")
	ready := fifo(t, s.agentDir, "ready")
	// The plain fake as the post-run command: a call of no phase and no
	// task is "execute".
	s.scenario(map[string][]fakes.Outcome{"execute:1": {{}}, "execute": {{WriteFiles: map[string]string{ready: "x"}, Hang: true}}})
	cmd, done := startPeal(t, s, s.env("PEAL_POST_RUN_COMMANDS="+bins["fakeagent"]), nil)
	if _, err := os.ReadFile(ready); err != nil {
		t.Fatal(err)
	}
	calls, _ := fakes.ReadCalls(s.agentDir)
	starts := fakes.Starts(calls)
	post := starts[len(starts)-1]
	if r := s.peal(s.env(), "run"); r.code != 0 {
		t.Fatalf("second run: exit %d: %s", r.code, r.stderr)
	}
	if !post.ID().Alive() {
		t.Fatal("the second run stopped the first run's post-run command")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	waitExited(t, cmd, done, 30*time.Second)
	if code := cmd.ProcessState.ExitCode(); code != 143 {
		t.Fatalf("a signal during the post-run commands: exit %d, want 143", code)
	}
}

// Losing both stdout and stderr is one graceful stop, not a first and a
// second (hard) one; a signal after it is the second stop.
func TestLostOutputsStopOnce(t *testing.T) {
	s := watchSignals()
	defer s.release()
	s.lose()
	s.lose()
	var sc *signalCause
	if !errors.As(context.Cause(s.ctx), &sc) || sc.sig != syscall.SIGPIPE {
		t.Fatalf("cause %v", context.Cause(s.ctx))
	}
	if s.hardCtx.Err() != nil {
		t.Fatal("losing the second output was taken for a second stop")
	}
	s.stop(syscall.SIGINT)
	if s.hardCtx.Err() == nil {
		t.Fatal("a signal after the loss is not a hard stop")
	}
}

// A signal while the start-up cleanup runs `stet finish` on a session an
// earlier run left open, and that finish hangs, stops peal within the kill
// grace with the signal's exit code; a second signal stops it at once even
// when the finish ignores SIGTERM. No agent is called.
func TestSignalDuringStartupCleanup(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, finish fakes.Outcome, grace string, signals ...syscall.Signal) {
		s := newSandbox(t, plan3)
		stetDir := filepath.Join(s.dir, "stet")
		os.MkdirAll(stetDir, 0o755)
		ready := fifo(t, s.agentDir, "ready")
		finish.WriteFiles = map[string]string{ready: "x"}
		// stet status exits 0: a session is open.
		sc := fakes.StetScenario{Rules: map[string][]fakes.Outcome{"status": {{Stdout: "baseline: 0123\n"}}, "finish": {finish}}}
		if err := fakes.WriteStetScenario(stetDir, sc); err != nil {
			t.Fatal(err)
		}
		testgit.Git(t, s.repo, "commit", "-q", "--allow-empty", "-m", "root")
		var stderr bytes.Buffer
		r, w, _ := os.Pipe()
		go func() { stderr.ReadFrom(r) }()
		// A git identity: with stet peal commits, and a run without one
		// is refused before it gets this far.
		cmd, done := startPeal(t, s, s.env(append([]string{"PEAL_STET_PATH=" + bins["fakestet"], fakes.StetDirEnv + "=" + stetDir,
			"PEAL_KILL_GRACE_SEC=" + grace, "PEAL_PHASE_TIMEOUT_SEC=600"}, testgit.Env...)...), w)
		w.Close()
		if _, err := os.ReadFile(ready); err != nil { // the finish runs
			t.Fatal(err)
		}
		for i, sig := range signals {
			cmd.Process.Signal(sig)
			if i == 0 && finish.TermFile != "" {
				got := make(chan error, 1)
				go func() { _, err := os.ReadFile(finish.TermFile); got <- err }()
				select {
				case err := <-got: // the finish got its SIGTERM
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("the finish got no SIGTERM after the first signal")
				}
			}
		}
		waitExited(t, cmd, done, 30*time.Second)
		if want := 128 + int(signals[0]); cmd.ProcessState.ExitCode() != want {
			t.Fatalf("exit %d, want %d\n%s", cmd.ProcessState.ExitCode(), want, stderr.String())
		}
		calls, err := fakes.ReadStetCalls(stetDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range fakes.StetEnds(calls) {
			if c.Cmd == "finish" {
				t.Fatalf("the finish was not stopped: it ended by itself (exit %d)", c.Exit)
			}
		}
		for _, c := range calls {
			if c.Event == fakes.EventStart && c.Cmd == "finish" && c.ID().Alive() {
				pid := c.ID().Host()
				c.ID().Kill()
				t.Fatalf("stet finish (pid %d) outlived peal", pid)
			}
		}
		if got := s.keys(); got != "" {
			t.Fatalf("agent calls %q after the interrupted start-up", got)
		}
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			// The finish hangs until it is stopped; the grace is short.
			run(t, fakes.Outcome{Hang: true}, "1", sig)
		})
	}
	t.Run("second signal", func(t *testing.T) {
		t.Parallel()
		term := fifo(t, t.TempDir(), "term")
		// The finish ignores SIGTERM and the grace is 600 s: only the second
		// signal ends the wait.
		run(t, fakes.Outcome{Hang: true, IgnoreTerm: true, TermFile: term}, "600", syscall.SIGINT, syscall.SIGINT)
	})
}

// release stops catching the signals and ends the watchers of a test that
// watched them in its own process. peal itself catches them until it exits.
func (s *signals) release() {
	s.once.Do(func() {
		signal.Stop(s.ch)
		signal.Stop(s.pipe)
		close(s.stopped)
		s.cancel(nil)
		s.hard()
	})
}
