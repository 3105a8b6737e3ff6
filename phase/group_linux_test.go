package phase

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"peal/internal/procs"
	"peal/internal/testkit/fakes"
)

// A daemon the agent started in a session of its own (out of the call's
// group) is found by its call id and stopped when the call ends.
func TestDaemonOutsideGroupIsStopped(t *testing.T) {
	t.Parallel()
	dir := setup(t, fakes.Outcome{Daemon: true, Stdout: "done"})
	res, err := Run(context.Background(), agentSpec(dir, 60*time.Second, time.Second))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("err %v, result %+v", err, res)
	}
	for _, pid := range grandchildren(t, dir) {
		if g, err := unix.Getpgid(pid); err == nil && g == res.ProcessGroupPID {
			t.Fatalf("the daemon %d stayed in the call's group", pid)
		}
		if procs.Alive(pid) {
			t.Fatalf("daemon %d outlived the call", pid)
		}
	}
}

// helperEnv makes the test binary act as a peal-like parent (see
// TestMain's caller in TestHelperParent).
const helperEnv = "PEAL_PHASE_TEST_PARENT"

// TestHelperParent is not a test: run as a child of the test with helperEnv
// set to a fake agent folder, it supervises one hanging agent call, as peal
// would, until it is killed.
func TestHelperParent(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("only runs as the child of TestAgentDiesWithPeal")
	}
	spec := agentSpec(dir, time.Hour, time.Second)
	Run(context.Background(), spec)
	os.Exit(0)
}

// An agent dies with the peal that supervises it, even when peal is killed
// with SIGKILL and cannot stop it itself.
func TestAgentDiesWithPeal(t *testing.T) {
	t.Parallel()
	dir := setup(t, fakes.Outcome{Hang: true})
	parent := exec.Command(os.Args[0], "-test.run=^TestHelperParent$")
	parent.Env = append(os.Environ(), helperEnv+"="+dir)
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { parent.Process.Kill(); parent.Wait() })
	agent := waitForCall(t, dir)
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	parent.Wait()
	waitExit(agent, 30*time.Second)
	if procs.Alive(agent) {
		syscall.Kill(agent, syscall.SIGKILL)
		t.Fatalf("agent %d outlived its killed parent", agent)
	}
}

// What an agent started, in its group or out of it (a daemon), dies with
// the peal that supervises the agent, even when peal is killed with SIGKILL:
// peal's guard kills it at once, without waiting for the next run's sweep.
func TestGrandchildDiesWithPeal(t *testing.T) {
	t.Parallel()
	for _, tc := range fakes.Leftovers() {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			dir := setup(t, tc.Outcome)
			parent := exec.Command(os.Args[0], "-test.run=^TestHelperParent$")
			parent.Env = append(os.Environ(), helperEnv+"="+dir)
			if err := parent.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { parent.Process.Kill(); parent.Wait() })
			grandchild := waitForGrandchild(t, dir)
			t.Cleanup(func() { killIfAlive(grandchild) })
			if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			parent.Wait()
			waitExit(grandchild, 30*time.Second)
			if procs.Alive(grandchild) {
				t.Fatalf("%s %d outlived the killed peal", tc.Name, grandchild)
			}
		})
	}
}

// waitForCall waits (on the fake's record file, with a generous bound) for
// the first agent call to start and returns its pid.
func waitForCall(t *testing.T, dir string) int {
	t.Helper()
	return waitForRecord(t, dir, func() int {
		if c, _ := fakes.ReadCalls(dir); len(c) > 0 {
			return c[0].ID().Host()
		}
		return 0
	})
}

// waitForGrandchild waits, as waitForCall does, for the first grandchild
// of an agent to record its pid, and returns the pid.
func waitForGrandchild(t *testing.T, dir string) int {
	t.Helper()
	return waitForRecord(t, dir, func() int {
		if p, _ := fakes.GrandchildPIDs(dir); len(p) > 0 {
			return p[0].Host()
		}
		return 0
	})
}

// waitForRecord waits, on inotify events of the fake's folder dir, until
// found returns a pid.
func waitForRecord(t *testing.T, dir string, found func() int) int {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_MODIFY|unix.IN_CREATE); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if pid := found(); pid != 0 {
			return pid
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		unix.Poll(fds, 1000)
		buf := make([]byte, 4096)
		if fds[0].Revents&unix.POLLIN != 0 {
			unix.Read(fd, buf)
		}
	}
	t.Fatal("the fake never recorded what the test waits for")
	return 0
}

// The parent-death signal must not fire when the thread that asked for the
// child exits while peal lives on: a child started from a goroutine whose
// locked thread then ends is still running.
func TestChildSurvivesThreadExit(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	dieWithParent(cmd.SysProcAttr)
	// The runtime cannot end the process's main thread: it keeps it instead
	// (tid = pid), and there would be nothing to check. Such a goroutine
	// unlocks and the next one tries.
	tid := make(chan int, 1)
	thread := 0
	for try := 0; thread == 0; try++ {
		if try == 100 {
			t.Skip("every goroutine ran on the main thread")
		}
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			if unix.Gettid() == os.Getpid() {
				runtime.UnlockOSThread()
				tid <- 0
				return
			}
			if err := startChild(cmd); err != nil {
				t.Error(err)
			}
			tid <- unix.Gettid()
		}()
		thread = <-tid
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if cmd.Process == nil {
		t.FailNow()
	}
	// Wait until that thread is gone from this process.
	task := filepath.Join("/proc/self/task", strconv.Itoa(thread))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(task); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the thread that started the child never ended")
		}
	}
	if !procs.Alive(cmd.Process.Pid) {
		t.Fatal("the child was killed when the thread that started it ended")
	}
}

// SweepLeftovers stops what another (dead) peal left in the same scope, and
// nothing of this process or of another scope.
func TestSweepLeftovers(t *testing.T) {
	t.Parallel()
	scope := fmt.Sprintf("sweep%d", time.Now().UnixNano())
	start := func(id string) *exec.Cmd {
		// The process says it runs, with the id in its environment, before
		// the sweep looks: a child between fork and exec still has this
		// process's environment.
		cmd := exec.Command("sh", "-c", "echo ready; exec sleep 60")
		cmd.Env = append(os.Environ(), CallIDEnv+"="+id)
		out, err := cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		go cmd.Wait()
		t.Cleanup(func() { cmd.Process.Kill() })
		return cmd
	}
	dead := start(scope + "/1/7")
	own := start(fmt.Sprintf("%s/%d/3", scope, os.Getpid()))
	other := start("other" + scope + "/1/7")
	if n := SweepLeftovers(scope, time.Second); n != 1 {
		t.Fatalf("swept %d processes, want 1", n)
	}
	waitExit(dead.Process.Pid, 10*time.Second)
	if procs.Alive(dead.Process.Pid) {
		t.Fatal("the dead run's leftover is alive")
	}
	mustLive(t, own, other)
}

// mustLive fails the test when one of cmds, none of them the dead peal's,
// is no longer alive.
func mustLive(t *testing.T, cmds ...*exec.Cmd) {
	t.Helper()
	for _, c := range cmds {
		if !procs.Alive(c.Process.Pid) {
			t.Errorf("process %d was killed, though it was not the dead peal's", c.Process.Pid)
		}
	}
}

func TestPidRange(t *testing.T) {
	t.Parallel()
	in := pidRange(100, 200)
	for pid, want := range map[int]bool{99: false, 100: true, 150: true, 200: true, 201: false} {
		if in(pid) != want {
			t.Errorf("100..200: pid %d in = %v", pid, !want)
		}
	}
	wrapped := pidRange(4000000, 50) // pid_max passed since 4000000
	for pid, want := range map[int]bool{3999999: false, 4000000: true, 4194303: true, 1: true, 50: true, 51: false} {
		if wrapped(pid) != want {
			t.Errorf("wrapped: pid %d in = %v", pid, !want)
		}
	}
}

// exec cancels from a goroutine it starts once the child runs, which may be
// before the group has stored the child's pid: that cancel still sends the
// child its SIGTERM. The test makes the interleaving happen: it starts the
// child as group.start does, then cancels as exec's watcher would, before
// start stores the pid.
func TestCancelBeforeThePidIsStored(t *testing.T) {
	t.Parallel()
	dir, term := notingTerm(t)
	spec := agentSpec(dir, time.Hour, time.Hour)
	cmd := exec.CommandContext(context.Background(), spec.Argv[0], spec.Argv[1:]...)
	cmd.Env = append(os.Environ(), spec.Env...)
	g := newGroup(cmd, "", time.Hour, nil, false)
	if err := startChild(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitForCall(t, dir)
	cmd.Cancel()
	awaitTerm(t, term)
	if g.pid.Load() != int64(cmd.Process.Pid) {
		t.Fatalf("group pid %d, child %d", g.pid.Load(), cmd.Process.Pid)
	}
}

// /proc answers for a thread's id as for a process's: the stray search, which
// probes pids one by one, must tell them apart or count a process once per
// thread.
func TestIsProcess(t *testing.T) {
	t.Parallel()
	if !isProcess(os.Getpid()) {
		t.Fatal("this process is not taken for one")
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	threads := 0
	for _, e := range tasks {
		tid, _ := strconv.Atoi(e.Name())
		if tid != os.Getpid() {
			threads++
			if isProcess(tid) {
				t.Errorf("thread %d is taken for a process", tid)
			}
		}
	}
	if threads == 0 {
		t.Fatal("no thread besides the main one to check")
	}
}

// A process that left the call's group is found once however many threads
// it runs: the stray search probes the pids handed out since the call's
// child, and the ids of the process's threads are among them.
func TestStraysCountThreadsOnce(t *testing.T) {
	t.Parallel()
	callID := fmt.Sprintf("test/%d/strays", os.Getpid())
	child := exec.Command("sleep", "60") // stands for the call's child, its group's leader
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	// The escaped process is the fake agent, a Go program (several
	// threads), hanging in a session of its own with the call's id and
	// starting nothing else.
	dir := setup(t, fakes.Outcome{Hang: true})
	spec := agentSpec(dir, time.Hour, time.Second)
	escaped := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	escaped.Env = append(append(os.Environ(), spec.Env...), CallIDEnv+"="+callID)
	escaped.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := escaped.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { escaped.Process.Kill(); escaped.Wait() })
	waitForCall(t, dir)
	pid := escaped.Process.Pid
	if tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid)); err != nil || len(tasks) < 2 {
		t.Fatalf("the escaped process runs %d threads (%v): nothing to tell apart", len(tasks), err)
	}
	if got := findStrays(callID, child.Process.Pid); !slices.Equal(got, []int{pid}) {
		t.Fatalf("strays %v, want [%d]", got, pid)
	}
}

// The pids started since a call's child are probed one by one when few, and
// read from the list of /proc when many: both hold a process started since,
// and neither one started long before.
func TestStartedSince(t *testing.T) {
	t.Parallel()
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	pid := child.Process.Pid
	if pid <= 2*maxProbe+1 {
		// The case of many starts at pid-2*maxProbe, which must be above
		// init's 1 for init to be one started long before.
		t.Skip("pids this low leave no room for the case of many")
	}
	for name, first := range map[string]int{"few": pid, "many": pid - 2*maxProbe} {
		got := startedSince(first)
		if !slices.Contains(got, pid) || slices.Contains(got, 1) {
			t.Errorf("%s since %d: child %d listed %v, init listed %v", name, first, pid, slices.Contains(got, pid), slices.Contains(got, 1))
		}
	}
}

// runGuard runs the test binary as the guard of peal pid dead, with a
// shared table that says count calls were under way, in groups, and
// returns what the guard printed once it has seen peal's end.
func runGuard(t *testing.T, dead string, count int32, groups ...int32) string {
	t.Helper()
	return runGuardNoted(t, dead, nil, count, groups...)
}

// runGuardNoted is runGuard with a kill note, written by note into the
// shared memory (nil: none).
func runGuardNoted(t *testing.T, dead string, note func([]byte), count int32, groups ...int32) string {
	t.Helper()
	fd, err := unix.MemfdCreate("guard-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	mem := os.NewFile(uintptr(fd), "guard-test")
	defer mem.Close()
	if err := mem.Truncate(sharedSize); err != nil {
		t.Fatal(err)
	}
	table, shared, err := mapShared(fd, unix.PROT_READ|unix.PROT_WRITE)
	if err != nil {
		t.Fatal(err)
	}
	if note != nil {
		note(shared)
	}
	table[0] = count
	copy(table[1:], groups)
	g := exec.Command(os.Args[0], "-test.run=^$")
	g.Env = []string{guardEnv + "=" + dead}
	g.ExtraFiles = []*os.File{mem}
	out, err := g.CombinedOutput() // standard input is /dev/null: peal has ended
	if err != nil {
		t.Fatalf("guard: %v: %s", err, out)
	}
	return string(out)
}

// sleeper starts a process that carries callID and, in a group of its
// own when own is set.
func sleeper(t *testing.T, callID string, own bool) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if callID != "" {
		cmd.Env = []string{CallIDEnv + "=" + callID}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: own}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

func killedBySIGKILL(c *exec.Cmd) bool {
	err := c.Wait()
	return err != nil && c.ProcessState.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
}

// A peal that dies between starting a child and recording its group leaves
// its guard only the call ids to go by: the guard kills every process whose
// call id names that peal, and nothing else (another peal's call, whatever
// its scope).
func TestGuardKillsByCallIDBeforeTheGroupIsKnown(t *testing.T) {
	t.Parallel()
	const dead = "999999999" // no such pid: a peal that died
	mine := sleeper(t, "a/scope/with/"+dead+"/7", false)
	other := sleeper(t, "a/scope/with/"+dead+"1/7", false)
	otherScope := sleeper(t, dead+"/"+strconv.Itoa(os.Getpid())+"/3", false)
	out := runGuard(t, dead, 1) // a child is starting: its group is not known yet
	if want := "its guard stopped 1 process(es)"; !strings.Contains(out, want) {
		t.Errorf("guard said %q, want %q", out, want)
	}
	if !killedBySIGKILL(mine) {
		t.Error("the dead peal's process was not killed")
	}
	mustLive(t, other, otherScope)
}

// The group of a running call is killed whole, even a process of it that
// carries no call id (it cleared its environment).
func TestGuardKillsRecordedGroups(t *testing.T) {
	t.Parallel()
	leader := sleeper(t, "", true)
	out := runGuard(t, "999999997", 1, int32(leader.Process.Pid))
	if !killedBySIGKILL(leader) {
		t.Fatalf("the recorded group was not killed (guard said %q)", out)
	}
}

// A guard whose peal ended with no call under way has nothing to look for:
// it exits without searching (a process that carries such a call id is then
// no call's: the calls were over).
func TestGuardOfACleanExitStopsNothing(t *testing.T) {
	t.Parallel()
	const dead = "999999998"
	cmd := sleeper(t, "s/"+dead+"/1", false)
	if out := runGuard(t, dead, 0); out != "" {
		t.Fatalf("guard said %q", out)
	}
	if !procs.Alive(cmd.Process.Pid) {
		t.Fatal("the guard of a clean exit searched and killed")
	}
}

// TestGuardKillNote: a guard whose peal died with calls under way appends
// the note's line, with the time it saw peal die, to the file the note
// named, once; to no file put in its place since, and to none when no call
// was under way.
func TestGuardKillNote(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	if err := os.WriteFile(record, []byte("{\"ev\":\"call_start\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	note := func(n []byte) { putKillNote(n, record, `{"ev":"killed","t":"`, "\"}\n") }
	before := time.Now()
	runGuardNoted(t, "999999996", note, 1)
	data, _ := os.ReadFile(record)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("record:\n%s", data)
	}
	var ev struct {
		Ev string    `json:"ev"`
		T  time.Time `json:"t"`
	}
	if err := json.Unmarshal([]byte(lines[1]), &ev); err != nil || ev.Ev != "killed" || ev.T.Before(before.Add(-time.Second)) {
		t.Fatalf("the note's line %q: %+v, %v", lines[1], ev, err)
	}
	// A file put in its place since is not the one noted.
	os.Rename(record, record+".prev")
	os.WriteFile(record, nil, 0o600)
	other := func(n []byte) {
		putKillNote(n, record+".prev", `{"ev":"killed","t":"`, "\"}\n") // noted while it was there
		os.Rename(record+".prev", record+".old")
		os.WriteFile(record+".prev", nil, 0o600)
	}
	runGuardNoted(t, "999999996", other, 1)
	if data, _ := os.ReadFile(record + ".prev"); len(data) != 0 {
		t.Fatalf("written to a file put in the noted one's place: %q", data)
	}
	// No call under way: nothing to note.
	os.WriteFile(record, nil, 0o600)
	runGuardNoted(t, "999999996", note, 0)
	if data, _ := os.ReadFile(record); len(data) != 0 {
		t.Fatalf("a note without a call under way: %q", data)
	}
}

// tableWatcher reads the guard's table while its call runs.
type tableWatcher struct{ count, groups []int32 }

func (w *tableWatcher) Begin(func(error)) {
	w.count = append(w.count, atomic.LoadInt32(&guard.table[0]))
	for i := 1; i < len(guard.table); i++ {
		if g := atomic.LoadInt32(&guard.table[i]); g != 0 {
			w.groups = append(w.groups, g)
		}
	}
}
func (w *tableWatcher) Line(Stream, []byte) {}
func (w *tableWatcher) Done()               {}

// The table peal shares with its guard holds a running call's group and
// forgets it when the call ends. Not parallel: no other call runs meanwhile.
func TestGuardTableFollowsCalls(t *testing.T) {
	w := &tableWatcher{}
	spec := agentSpec(setup(t, fakes.Outcome{Stdout: "x"}), time.Minute, time.Second)
	spec.Watch = w
	res, err := Run(context.Background(), spec)
	if err != nil || guard.table == nil {
		t.Fatalf("err %v, guard table %v", err, guard.table != nil)
	}
	if !slices.Equal(w.count, []int32{1}) || !slices.Equal(w.groups, []int32{int32(res.ProcessGroupPID)}) {
		t.Fatalf("while the call ran: count %v, groups %v; want [1] and [%d]", w.count, w.groups, res.ProcessGroupPID)
	}
	w2 := &tableWatcher{}
	w2.Begin(nil)
	if !slices.Equal(w2.count, []int32{0}) || len(w2.groups) != 0 {
		t.Fatalf("once it ended: count %v, groups %v", w2.count, w2.groups)
	}
}
