package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
	"peal/state"
)

// TestStress runs peal from outside, as a user's shell would, and hits it
// with random signals (SIGINT, SIGTERM, SIGHUP, SIGKILL) at random moments,
// re-running it after each until the plan is done; and starts runs two at a
// time on one state folder. After every run it checks what peal promises:
// the exit code is the signal's; no agent or anything an agent started is
// left running once a run has ended (after SIGKILL too); state.json is
// always whole; a task recorded as completed never runs again; every ticket
// agrees with state.json at the end.
//
// It takes minutes, so it runs only when PEAL_STRESS names a number of
// rounds (e.g. PEAL_STRESS=30 go test -run TestStress ./cmd/peal).
func TestStress(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("PEAL_STRESS"))
	if rounds <= 0 {
		t.Skip("set PEAL_STRESS=<rounds> to run the stress test")
	}
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("PEAL_STRESS_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (PEAL_STRESS_SEED)", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	for round := range rounds {
		// Every other round, the repository has a commit and the tasks
		// commit their work, so that the block runs in worktrees.
		worktrees := round%2 == 1
		t.Run(fmt.Sprintf("round %d", round+1), func(t *testing.T) { stressRound(t, rng, worktrees) })
	}
}

const stressPlan = "## Task 1\nA\n## Task 2 (parallel)\nB\n## Task 3 (parallel)\nC\n## Task 4 (parallel)\nD\n## Task 5\nE\n## Task 6\nF\n"

func stressRound(t *testing.T, rng *rand.Rand, worktrees bool) {
	s := newSandbox(t, stressPlan)
	env := s.env("PEAL_MAX_PARALLEL=3", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true")
	if worktrees {
		testgit.Git(t, s.repo, "commit", "-q", "--allow-empty", "-m", "root")
		env = append(append(env, "PEAL_COMMIT_AFTER_PHASE2=true"), testgit.Env...)
	}
	rules := map[string][]fakes.Outcome{}
	for task := 1; task <= 6; task++ {
		for _, ph := range []string{"plan", "execute"} {
			out := fakes.Outcome{SleepMS: rng.IntN(300)}
			switch rng.IntN(6) {
			case 0:
				out.Grandchild = true
			case 1:
				out.Daemon = true
			case 2:
				out.ChatterCount, out.ChatterMS = 3, 20
			}
			if ph == "execute" {
				// Relative: in the folder the task works in, its worktree
				// in a block.
				out.WriteFiles = map[string]string{fmt.Sprintf("task%d.txt", task): "done"}
			}
			rules[fmt.Sprintf("%s:%d", ph, task)] = []fakes.Outcome{out}
		}
	}
	s.scenario(rules)
	signals := []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGKILL, 0}
	seen := 0 // agent call records already checked
	var completed []int
	for run := 1; ; run++ {
		if run > 40 {
			t.Fatalf("the plan is not done after %d runs", run-1)
		}
		// Two at a time now and then: exactly one may work.
		var rival *stressProc
		if rng.IntN(4) == 0 {
			rival = startStress(t, s, env)
		}
		p := startStress(t, s, env)
		sig := signals[rng.IntN(len(signals))]
		if sig != 0 {
			select {
			case <-p.done:
			case <-time.After(time.Duration(rng.IntN(1500)) * time.Millisecond):
				p.cmd.Process.Signal(sig)
			}
		}
		code := p.wait(t)
		if rival != nil {
			// The rival either did the work or was refused at once.
			if rcode := rival.wait(t); rcode != 0 && !(rcode == 1 && strings.Contains(rival.stderr(), "state folder")) {
				t.Fatalf("run %d: the rival run exited %d: %s", run, rcode, rival.stderr())
			}
		}
		switch {
		case code == 0:
		case sig == syscall.SIGKILL && code == -1:
		case sig != 0 && sig != syscall.SIGKILL && code == 128+int(sig):
		case sig != 0 && code == -1 && p.diedOf(sig) && !recordedRun(t, s, p.cmd.Process.Pid):
			// The signal came while the process was still starting, before
			// peal's main could catch it: it died of it, as any program does
			// then, having done nothing (a shell reports the same 128+n).
		case rival != nil && code == 1 && strings.Contains(p.stderr(), "state folder"):
			// The rival took the folder first.
		default:
			t.Fatalf("run %d: exit %d after signal %v; stderr:\n%s", run, code, sig, p.stderr())
		}
		t.Logf("run %d: signal %v, exit %d, rival %v", run, sig, code, rival != nil)
		checkStateWhole(t, s)
		calls := stressCalls(t, s)
		for _, c := range calls[seen:] {
			task, _ := strconv.Atoi(c.Task)
			if slices.Contains(completed, task) {
				t.Fatalf("run %d: task %d ran again (%s) after it was recorded as completed", run, task, c.Key)
			}
		}
		seen = len(calls)
		// Nothing a run's calls started may be left once it has ended, even
		// of SIGKILL: its guard kills what they started.
		checkNothingLeft(t, s, calls)
		if code != -1 {
			// A killed run may leave worktrees: the next run sweeps them.
			if left := testgit.WorktreeLeftovers(t, s.repo, s.stateDir); len(left) > 0 {
				t.Fatalf("run %d: left behind after exit %d: %q; stderr:\n%s", run, code, left, p.stderr())
			}
		}
		completed = s.completedOrNone()
		if code == 0 {
			break
		}
	}
	if !slices.Equal(completed, []int{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("completed %v", completed)
	}
	checkNothingLeft(t, s, stressCalls(t, s))
	if left := testgit.WorktreeLeftovers(t, s.repo, s.stateDir); len(left) > 0 {
		t.Fatalf("left behind: %q", left)
	}
	checkTickets(t, s)
}

type stressProc struct {
	cmd    *exec.Cmd
	done   <-chan struct{}
	errOut *os.File
	path   string
}

// startStress starts `peal run` with its stderr in a file.
func startStress(t *testing.T, s *sandbox, env []string) *stressProc {
	t.Helper()
	f, err := os.CreateTemp(s.dir, "stderr-*")
	if err != nil {
		t.Fatal(err)
	}
	cmd, done := startPeal(t, s, env, f)
	return &stressProc{cmd: cmd, done: done, errOut: f, path: f.Name()}
}

func (p *stressProc) wait(t *testing.T) int {
	waitExited(t, p.cmd, p.done, 120*time.Second)
	p.errOut.Close()
	return p.cmd.ProcessState.ExitCode()
}

// diedOf tells whether the process ended by sig.
func (p *stressProc) diedOf(sig syscall.Signal) bool {
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// recordedRun tells whether the run record of the state folder (this run's
// or, rotated, the previous one's) holds the start of the run of process pid.
func recordedRun(t *testing.T, s *sandbox, pid int) bool {
	t.Helper()
	for _, name := range []string{state.RecordName, state.RecordPrevName} {
		events, _, err := state.ReadRecord(filepath.Join(s.stateDir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range events {
			if ev.Ev == state.EvRunStart && ev.PID == pid {
				return true
			}
		}
	}
	return false
}

func (p *stressProc) stderr() string {
	data, _ := os.ReadFile(p.path)
	return string(data)
}

func (s *sandbox) completedOrNone() []int {
	if _, err := os.Stat(filepath.Join(s.stateDir, "state.json")); err != nil {
		return nil
	}
	return s.completed()
}

// checkStateWhole: state.json, when there, is one whole JSON document.
func checkStateWhole(t *testing.T, s *sandbox) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(s.stateDir, "state.json"))
	if os.IsNotExist(err) {
		return
	}
	var doc map[string]any
	if err != nil || json.Unmarshal(data, &doc) != nil {
		t.Fatalf("state.json is torn: %v %q", err, data)
	}
}

func stressCalls(t *testing.T, s *sandbox) []fakes.Call {
	t.Helper()
	c, err := fakes.ReadCalls(s.agentDir)
	if err != nil {
		t.Fatal(err)
	}
	return fakes.Starts(c)
}

// checkNothingLeft: no agent and no grandchild or daemon of one is alive.
func checkNothingLeft(t *testing.T, s *sandbox, calls []fakes.Call) {
	t.Helper()
	ids, _ := fakes.GrandchildPIDs(s.agentDir)
	for _, c := range calls {
		ids = append(ids, c.ID())
	}
	for _, id := range ids {
		waitPID(id.Host(), 10*time.Second) // the kill grace is 1 s
		if id.Alive() {
			pid := id.Host()
			id.Kill()
			t.Fatalf("process %d outlived its run", pid)
		}
	}
}

// checkTickets: every task's ticket ends with a closed attempt, none in
// progress.
func checkTickets(t *testing.T, s *sandbox) {
	t.Helper()
	for task := 1; task <= 6; task++ {
		data, err := os.ReadFile(filepath.Join(s.stateDir, "knowledge", "tickets", s.ticket(task), "retry-state.json"))
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Attempts []struct {
				Status string `json:"status"`
			} `json:"attempts"`
		}
		if err := json.Unmarshal(data, &st); err != nil || len(st.Attempts) == 0 {
			t.Fatalf("ticket of task %d: %v %s", task, err, data)
		}
		if last := st.Attempts[len(st.Attempts)-1].Status; last != "closed" {
			t.Fatalf("ticket of task %d ends %s, but the task is completed", task, last)
		}
	}
}
