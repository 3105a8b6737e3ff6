package phase

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"peal/internal/testkit/fakes"
)

// A prompt on stdin reaches the child whole, beyond the 128 KiB an argument
// may hold, and is not in its argv.
func TestPromptOnStdin(t *testing.T) {
	t.Parallel()
	dir := setup(t, fakes.Outcome{})
	prompt := strings.Repeat("a long prompt line\n", 20000) // 380 KB
	spec := agentSpec(dir, 30*time.Second, time.Second)
	spec.Argv = []string{fakeAgent, "--print", "-"}
	spec.Stdin = []byte(prompt)
	res, err := Run(context.Background(), spec)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("err %v, result %+v", err, res)
	}
	c := calls(t, dir)
	if len(c) != 1 || c[0].StdinNull || c[0].Stdin != prompt {
		t.Fatalf("the child read %d bytes (stdin null: %v), want %d", len(c[0].Stdin), c[0].StdinNull, len(prompt))
	}
	for _, a := range c[0].Argv {
		if strings.Contains(a, "long prompt") {
			t.Fatal("the prompt is in argv")
		}
	}
}

// Without Stdin, standard input is /dev/null.
func TestStdinNullByDefault(t *testing.T) {
	t.Parallel()
	dir := setup(t, fakes.Outcome{})
	if _, err := Run(context.Background(), agentSpec(dir, 30*time.Second, time.Second)); err != nil {
		t.Fatal(err)
	}
	if c := calls(t, dir); !c[0].StdinNull {
		t.Fatal("stdin is not /dev/null")
	}
}

// A child that never reads its stdin does not hold the call up: the prompt
// writer gives up when the call ends.
func TestStdinNeverRead(t *testing.T) {
	t.Parallel()
	spec := Spec{Phase: "plan", Argv: []string{"/bin/sh", "-c", "exit 3"}, Stdin: make([]byte, 1<<20),
		Timeout: 30 * time.Second, KillGrace: time.Second}
	res, err := Run(context.Background(), spec)
	if err != nil || res.ExitCode != 3 {
		t.Fatalf("err %v, exit %d", err, res.ExitCode)
	}
}

// lineWatcher records lines and ends the call on a marker line.
type lineWatcher struct {
	mu     sync.Mutex
	lines  []string
	marker string
	cause  error
	end    func(error)
	began  int
	done   int
}

func (w *lineWatcher) Begin(end func(error)) { w.began++; w.end = end }
func (w *lineWatcher) Line(s Stream, line []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, s.String()+":"+string(line))
	if w.marker != "" && string(line) == w.marker {
		w.end(w.cause)
	}
}
func (w *lineWatcher) Done() { w.done++ }

// A Watcher sees every line of both streams, the last one without a line
// end too.
func TestWatcherSeesLines(t *testing.T) {
	t.Parallel()
	spec := Spec{Phase: "plan", Argv: []string{"/bin/sh", "-c", `printf 'one\r\ntwo\n'; printf 'err\n' >&2; sleep 0.01; printf 'last'`},
		Timeout: 30 * time.Second, KillGrace: time.Second}
	w := &lineWatcher{}
	spec.Watch = w
	res, err := Run(context.Background(), spec)
	if err != nil || res.ExitCode != 0 || res.Ended != nil {
		t.Fatalf("err %v, result %+v", err, res)
	}
	// Lines keep their order within a stream; the two streams interleave
	// as the reads happen.
	var out, errs []string
	for _, l := range w.lines {
		if strings.HasPrefix(l, "stderr:") {
			errs = append(errs, l)
		} else {
			out = append(out, l)
		}
	}
	got := strings.Join(out, "|") + " / " + strings.Join(errs, "|")
	if got != "stdout:one|stdout:two|stdout:last / stderr:err" || w.began != 1 || w.done != 1 {
		t.Fatalf("lines %q, began %d, done %d", got, w.began, w.done)
	}
}

// A Watcher that ends a call stops its group at once, and the cause is the
// result's Ended: an agent that printed its result and lingers is not waited
// for until the timeout.
func TestWatcherEndsCall(t *testing.T) {
	t.Parallel()
	dir := setup(t, fakes.Outcome{Stdout: "RESULT\n", Grandchild: true, Hang: true})
	spec := agentSpec(dir, time.Hour, time.Second)
	cause := errors.New("final result seen")
	w := &lineWatcher{marker: "RESULT", cause: cause}
	spec.Watch = w
	res, err := Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ended != cause || res.TimedOut || res.ExitCode != -1 || res.Stdout != "RESULT\n" {
		t.Fatalf("result %+v", res)
	}
	noGrandchildLeft(t, dir, "an ended call")
}

// A call gets a temporary folder of its own in TMPDIR, removed afterwards.
func TestCallTempDir(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "tmp")
	spec := Spec{Phase: "execute", Argv: []string{"/bin/sh", "-c", `echo "$TMPDIR"; echo left > "$TMPDIR/junk"`},
		TempRoot: root, Timeout: 30 * time.Second, KillGrace: time.Second}
	res, err := Run(context.Background(), spec)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("err %v, result %+v", err, res)
	}
	tmp := strings.TrimSpace(res.Stdout)
	if filepath.Dir(tmp) != root {
		t.Fatalf("TMPDIR %q is not under %s", tmp, root)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the call's folder is still there: %v", err)
	}
}

// With CombinedOutput both streams reach Stdout in the order they were
// written, and the sink sees the same.
func TestCombinedOutput(t *testing.T) {
	t.Parallel()
	var sink strings.Builder
	spec := Spec{Phase: "check", Argv: []string{"/bin/sh", "-c", "echo one; echo two >&2; echo three; echo four >&2; exit 1"},
		CombinedOutput: true, StdoutSink: &sink, Timeout: 30 * time.Second, KillGrace: time.Second}
	res, err := Run(context.Background(), spec)
	if err != nil || res.ExitCode != 1 {
		t.Fatalf("err %v, result %+v", err, res)
	}
	if want := "one\ntwo\nthree\nfour\n"; res.Stdout != want || res.Stderr != "" || sink.String() != want {
		t.Fatalf("stdout %q, stderr %q, sink %q; want %q on stdout only", res.Stdout, res.Stderr, sink.String(), want)
	}
}

// Task 0 is a task like any other: its calls get PEAL_TASK_INDEX=0; a call
// of no task gets none.
func TestTaskZeroEnv(t *testing.T) {
	t.Parallel()
	if env := strings.Join(CallEnv("plan", 0, 1), " "); !strings.Contains(env, "PEAL_TASK_INDEX=0") {
		t.Fatalf("task 0: %s", env)
	}
	if env := strings.Join(CallEnv("normalize", NoTask, 1), " "); strings.Contains(env, "PEAL_TASK_INDEX") {
		t.Fatalf("no task: %s", env)
	}
}

// Waiting for a group's leftovers works whatever the descriptor numbers:
// with more than 1,024 files open, the wait must neither panic nor return
// before the leftover is gone.
func TestLeftoverWaitWithManyOpenFiles(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < 1200 {
		if lim.Max < 1200 {
			t.Skipf("the open-file limit %d is too low for this test", lim.Max)
		}
		raised := lim
		raised.Cur = 1200
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) })
	}
	var files []*os.File
	t.Cleanup(func() {
		for _, f := range files {
			f.Close()
		}
	})
	for len(files) < 1100 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	dir := setup(t, fakes.Outcome{Grandchild: true, GrandchildIgnoreTerm: true})
	res, err := Run(context.Background(), agentSpec(dir, 60*time.Second, 200*time.Millisecond))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("err %v, exit %d", err, res.ExitCode)
	}
	noGrandchildLeft(t, dir, "the call")
}

// notingTerm sets up a scenario whose child hangs, ignores SIGTERM and
// notes it in term, a named pipe: reading term returns once the child got
// SIGTERM.
func notingTerm(t *testing.T) (dir, term string) {
	t.Helper()
	term = filepath.Join(t.TempDir(), "term")
	if err := syscall.Mkfifo(term, 0o644); err != nil {
		t.Fatal(err)
	}
	return setup(t, fakes.Outcome{IgnoreTerm: true, TermFile: term, Hang: true}), term
}

// awaitTerm waits, with a generous bound, until the child of notingTerm
// has noted its SIGTERM in term.
func awaitTerm(t *testing.T, term string) {
	t.Helper()
	got := make(chan error, 1)
	go func() { _, err := os.ReadFile(term); got <- err }()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		os.WriteFile(term, nil, 0o644) // let the reader go
		t.Fatal("the child never got SIGTERM")
	}
}

// After a hard stop a cancelled call no longer waits out the kill grace: a
// child that ignores SIGTERM is killed at once.
func TestHardStopSkipsGrace(t *testing.T) {
	t.Parallel()
	dir, term := notingTerm(t)
	ctx, cancel := context.WithCancel(context.Background())
	hardCtx, hard := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Run(WithHardStop(ctx, hardCtx), agentSpec(dir, time.Hour, time.Hour))
		done <- err
	}()
	waitForCall(t, dir)
	cancel()
	awaitTerm(t, term) // the child got SIGTERM and ignored it
	hard()
	select {
	case err := <-done:
		var ie *InterruptedError
		if !errors.As(err, &ie) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call still waits for the kill grace after a hard stop")
	}
}

// slowWatcher stalls once, at a line past what the pipes can hold: by then
// the child has written everything and exited, and the reading goes on for
// longer than the kill grace after the exit, as it may for a watcher that
// parses events.
type slowWatcher struct{ lines int }

func (slowWatcher) Begin(func(error)) {}
func (w *slowWatcher) Line(Stream, []byte) {
	if w.lines++; w.lines == 1500 {
		time.Sleep(500 * time.Millisecond)
	}
}
func (*slowWatcher) Done() {}

// What a child printed before it exited is read to the end, however long the
// reading takes after the exit: the kill grace bounds the wait for a pipe
// that some leftover holds, not the reading of what is in it.
func TestOutputReadToTheEndAfterExit(t *testing.T) {
	t.Parallel()
	line := strings.Repeat("a", 49) + "\n"
	spec := Spec{Phase: "plan", Argv: []string{"/bin/sh", "-c", "yes " + line[:49] + " | head -n 2000"},
		Timeout: time.Minute, KillGrace: 200 * time.Millisecond, Watch: &slowWatcher{}}
	res, err := Run(context.Background(), spec)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("err %v, result %+v", err, res)
	}
	if want := strings.Repeat(line, 2000); res.Stdout != want {
		t.Fatalf("read %d of %d bytes", len(res.Stdout), len(want))
	}
}
