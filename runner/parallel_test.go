package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"peal/config"
	"peal/internal/procs"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
	"peal/phase"
	"peal/plan"
	"peal/tickets"
)

// The tests below order agents by events, never by sleeps: a fake that
// writes to a ready pipe (write_files) says it is running, a fake that reads
// a gate (wait_file) goes on only when the test opens the gate, and a log
// record marks a step of the runner that no agent can see. Every wait has a
// deadline that only guards against a hang.
const eventDeadline = 60 * time.Second

// gatePipe makes a named pipe for an outcome's wait_file; any fresh named
// pipe serves, so it is made like a ready pipe.
func gatePipe(t *testing.T) string {
	t.Helper()
	return readyPipe(t)
}

// openGate lets the fake blocked on gate p go on. Opening a named pipe for
// writing returns once a reader has it open, so this also waits for the fake
// to reach the gate.
func openGate(t *testing.T, p string) {
	t.Helper()
	opened := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err == nil {
			err = f.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(eventDeadline):
		// A reader that opens and leaves frees the goroutine above.
		if f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		t.Fatalf("no fake reached the gate %s", p)
	}
}

// signals is the write_files of a fake that says on ready pipe p that it runs.
func signals(p string) map[string]string { return map[string]string{p: "x"} }

// logRecord is a log record as logEvents keeps it: the message and every
// attribute, the logger's own (task) included, as text.
type logRecord struct {
	msg   string
	attrs map[string]string
}

// logEvents keeps every record of a run's log so a test can block until a
// record it names has been written.
type logEvents struct {
	mu      sync.Mutex
	records []logRecord
	changed chan struct{} // closed and replaced on every record
}

func newLogEvents() *logEvents { return &logEvents{changed: make(chan struct{})} }

func (e *logEvents) add(r logRecord) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.records = append(e.records, r)
	close(e.changed)
	e.changed = make(chan struct{})
}

// wait blocks until n records matching match have been logged.
func (e *logEvents) wait(t *testing.T, what string, n int, match func(logRecord) bool) {
	t.Helper()
	deadline := time.After(eventDeadline)
	seen, found := 0, 0
	for {
		e.mu.Lock()
		records, changed := e.records, e.changed
		e.mu.Unlock()
		for _, r := range records[seen:] {
			if match(r) {
				found++
			}
		}
		if found >= n {
			return
		}
		seen = len(records)
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("never logged: %s", what)
		}
	}
}

// eventHandler hands every record to a logEvents and then to the handler it wraps.
type eventHandler struct {
	slog.Handler
	events *logEvents
	attrs  []slog.Attr
}

func (h eventHandler) Handle(ctx context.Context, r slog.Record) error {
	rec := logRecord{msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	err := h.Handler.Handle(ctx, r)
	h.events.add(rec)
	return err
}

func (h eventHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return eventHandler{h.Handler.WithAttrs(attrs), h.events, append(slices.Clip(h.attrs), attrs...)}
}

func (h eventHandler) WithGroup(name string) slog.Handler {
	return eventHandler{h.Handler.WithGroup(name), h.events, h.attrs}
}

// taskNotStarted matches the record of a block declining to start task
// because the run is certain to stop.
func taskNotStarted(task int) func(logRecord) bool {
	return func(r logRecord) bool {
		return strings.HasPrefix(r.msg, "task not started") && r.attrs["task"] == fmt.Sprint(task)
	}
}

// callFailed matches the record of an agent call of phase that exited
// non-zero; the record is written once the agent has exited, so after it
// recorded its end.
func callFailed(phase string) func(logRecord) bool {
	return func(r logRecord) bool {
		return r.msg == "call finished" && r.attrs["phase"] == phase && r.attrs["exit_code"] != "0"
	}
}

// backgroundRun is a Run in its own goroutine, for a test that steers its
// agents while it runs.
type backgroundRun struct {
	events *logEvents
	done   chan struct{}
	out    Outcome
	err    error
	// cancel stands for a signal: cancel(errors.New("SIGINT")).
	cancel context.CancelCauseFunc
}

// startRun starts Run as h.run would, logging to h.log and to the returned
// run's events. If the test ends before Run has returned, the cleanup
// cancels it, which stops every agent, one blocked on a gate or a ready pipe
// included, and waits for it.
func startRun(h *harness, env ...string) *backgroundRun {
	h.t.Helper()
	return startCfg(h, h.config(env...))
}

// startCfg is startRun with a config of the test's own and more options.
func startCfg(h *harness, cfg *config.Config, more ...Option) *backgroundRun {
	r := &backgroundRun{events: newLogEvents(), done: make(chan struct{})}
	text := slog.NewTextHandler(h.log, &slog.HandlerOptions{Level: slog.LevelDebug})
	log := slog.New(eventHandler{Handler: text, events: r.events})
	ctx, cancel := context.WithCancelCause(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		r.out, r.err = Run(ctx, cfg, log, h.opts(more...)...)
	}()
	h.t.Cleanup(func() {
		cancel(errors.New("the test ended"))
		select {
		case <-r.done:
		case <-time.After(eventDeadline):
			h.t.Error("Run did not return after cancellation")
		}
	})
	return r
}

// wait returns Run's result.
func (r *backgroundRun) wait(t *testing.T) (Outcome, error) {
	t.Helper()
	select {
	case <-r.done:
		return r.out, r.err
	case <-time.After(eventDeadline):
		t.Fatal("Run did not return")
		return Outcome{}, nil
	}
}

// parallelPlan builds a plan from a pattern: the i-th letter is task i+1,
// 'p' a (parallel) task and 's' a sequential one.
func parallelPlan(pattern string) string {
	var b strings.Builder
	for i, kind := range pattern {
		mark := ""
		if kind == 'p' {
			mark = " (parallel)"
		}
		fmt.Fprintf(&b, "## Task %d%s\nDo step %d\n\n", i+1, mark, i+1)
	}
	return b.String()
}

// agentSpan is one agent process's life as the fake recorded it.
type agentSpan struct {
	key        string
	pid        procs.ID
	start, end time.Time // end is the far future for an agent that never recorded its end
}

// agentSpans pairs the start and end records of every agent call by pid.
func agentSpans(h *harness) []agentSpan {
	h.t.Helper()
	records, err := fakes.ReadCalls(h.agentDir)
	if err != nil {
		h.t.Fatal(err)
	}
	ends := map[procs.ID]time.Time{}
	for _, c := range fakes.Ends(records) {
		ends[c.ID()] = c.Time
	}
	var spans []agentSpan
	for _, c := range fakes.Starts(records) {
		end, found := ends[c.ID()]
		if !found {
			end = time.Unix(math.MaxInt32, 0)
		}
		spans = append(spans, agentSpan{key: c.Key, pid: c.ID(), start: c.Time, end: end})
	}
	return spans
}

// span returns the span of the call with key, failing the test if there is
// not exactly one.
func span(t *testing.T, spans []agentSpan, key string) agentSpan {
	t.Helper()
	var found []agentSpan
	for _, s := range spans {
		if s.key == key {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d calls %s in %v", len(found), key, spans)
	}
	return found[0]
}

// maxAlive is the largest number of agents alive at once. An agent records
// its end before it exits, and peal starts the next agent only after reaping
// one, so a freed slot's end always sorts before the start that reuses it.
func maxAlive(spans []agentSpan) int {
	type event struct {
		at    time.Time
		delta int
	}
	var events []event
	for _, s := range spans {
		events = append(events, event{s.start, +1}, event{s.end, -1})
	}
	sort.Slice(events, func(i, j int) bool {
		if !events[i].at.Equal(events[j].at) {
			return events[i].at.Before(events[j].at)
		}
		return events[i].delta < events[j].delta
	})
	alive, most := 0, 0
	for _, e := range events {
		alive += e.delta
		most = max(most, alive)
	}
	return most
}

// taskSpans keeps the spans of the given tasks' calls.
func taskSpans(spans []agentSpan, tasks ...int) []agentSpan {
	var out []agentSpan
	for _, s := range spans {
		for _, t := range tasks {
			if strings.HasSuffix(s.key, fmt.Sprintf(":%d", t)) {
				out = append(out, s)
			}
		}
	}
	return out
}

// gatedExecutes makes the executes of tasks say they run and then hold on a
// gate: once the test has read every ready pipe, those agents are alive
// at once; opening the gates lets them end.
func gatedExecutes(t *testing.T, tasks ...int) (rules map[string][]fakes.Outcome, readies, gates []string) {
	t.Helper()
	rules = map[string][]fakes.Outcome{}
	for _, task := range tasks {
		r, g := readyPipe(t), gatePipe(t)
		readies, gates = append(readies, r), append(gates, g)
		rules[fmt.Sprintf("execute:%d", task)] = []fakes.Outcome{{WriteFiles: signals(r), WaitFile: g}}
	}
	return rules, readies, gates
}

// holdAllThenRelease waits until every gated agent runs, then opens every gate.
func holdAllThenRelease(t *testing.T, readies, gates []string) {
	t.Helper()
	for _, r := range readies {
		waitReady(t, r)
	}
	for _, g := range gates {
		openGate(t, g)
	}
}

// gatedFail is an agent failure that happens only once the test opens g.
func gatedFail(g string) fakes.Outcome {
	out := fail
	out.WaitFile = g
	return out
}

// slowExecutes makes every execute last long enough that agents of one
// block visibly overlap in the records.
func slowExecutes(ms int) map[string][]fakes.Outcome {
	return map[string][]fakes.Outcome{"execute": {{SleepMS: ms}}}
}

func sortedKeys(h *harness) []string {
	keys := fakes.Keys(h.calls())
	slices.Sort(keys)
	return keys
}

func TestParallelBlockMaxAlive(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pattern     string
		maxParallel int
		want        int
	}{
		{"pppppp", 3, 3},
		{"pppp", 2, 2},
		{"ppp", 4, 3},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d tasks on %d", len(tc.pattern), tc.maxParallel), func(t *testing.T) {
			h := newHarness(t, parallelPlan(tc.pattern))
			// The first tasks take every slot; their executes all run at
			// once before any may end.
			var first []int
			for task := 1; task <= tc.want; task++ {
				first = append(first, task)
			}
			rules, readies, gates := gatedExecutes(t, first...)
			h.scenario(rules)
			run := startRun(h, fmt.Sprintf("PEAL_MAX_PARALLEL=%d", tc.maxParallel))
			holdAllThenRelease(t, readies, gates)
			out, err := run.wait(t)
			if err != nil {
				t.Fatal(err)
			}
			if got := maxAlive(agentSpans(h)); got != tc.want {
				t.Fatalf("at most %d agents alive at once, want %d; calls %q", got, tc.want, h.keys())
			}
			var all []int
			for i := range tc.pattern {
				all = append(all, i+1)
			}
			if out.ExitCode != ExitOK || !slices.Equal(out.Completed, all) || !slices.Equal(h.state().CompletedTaskIndices, all) {
				t.Fatalf("outcome %+v, state %+v", out, h.state())
			}
			if len(h.calls()) != 2*len(tc.pattern) {
				t.Fatalf("calls %q", h.keys())
			}
		})
	}
}

func TestBlockBetweenSequentialTasks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, parallelPlan("sppps"))
	rules, readies, gates := gatedExecutes(t, 2, 3, 4)
	h.scenario(rules)
	run := startRun(h, "PEAL_MAX_PARALLEL=3")
	holdAllThenRelease(t, readies, gates)
	if _, err := run.wait(t); err != nil {
		t.Fatal(err)
	}
	spans := agentSpans(h)
	before, block, after := taskSpans(spans, 1), taskSpans(spans, 2, 3, 4), taskSpans(spans, 5)
	if got := maxAlive(block); got != 3 {
		t.Fatalf("block: at most %d agents alive, want 3", got)
	}
	if maxAlive(before) != 1 || maxAlive(after) != 1 || len(before) != 2 || len(after) != 2 {
		t.Fatalf("sequential tasks overlap or are missing: %v", spans)
	}
	for _, b := range block {
		if !before[1].end.Before(b.start) || !b.end.Before(after[0].start) {
			t.Fatalf("%s overlaps a sequential task: %v", b.key, spans)
		}
	}
}

// TestParallelOff: every way of turning parallel off, or a single slot,
// runs a block one task after the other.
func TestParallelOff(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		env  []string
	}{
		{"default", nil},
		{"max_parallel 0 forces off", []string{"PEAL_PARALLEL=true", "PEAL_MAX_PARALLEL=0"}},
		{"explicit parallel false wins", []string{"PEAL_PARALLEL=false", "PEAL_MAX_PARALLEL=3"}},
		{"one slot", []string{"PEAL_MAX_PARALLEL=1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, parallelPlan("ppp"))
			h.scenario(slowExecutes(100))
			if _, err := h.run(tc.env...); err != nil {
				t.Fatal(err)
			}
			if got := h.keys(); got != "plan:1 execute:1 plan:2 execute:2 plan:3 execute:3" {
				t.Fatalf("calls %q", got)
			}
			if got := maxAlive(agentSpans(h)); got != 1 || strings.Contains(h.log.String(), "parallel block started") {
				t.Fatalf("ran as a block: %d agents alive at once", got)
			}
		})
	}
}

func TestBlockOfOnePendingTaskIsSequential(t *testing.T) {
	t.Parallel()
	h := newHarness(t, parallelPlan("ppp"))
	writeState(t, h, []int{1, 3})
	if _, err := h.run("PEAL_MAX_PARALLEL=3"); err != nil {
		t.Fatal(err)
	}
	if h.keys() != "plan:2 execute:2" || strings.Contains(h.log.String(), "parallel block started") {
		t.Fatalf("calls %q; log:\n%s", h.keys(), h.log)
	}
	if !slices.Equal(h.state().CompletedTaskIndices, []int{1, 2, 3}) {
		t.Fatalf("state %+v", h.state())
	}
}

// TestResumeInsideABlock: a re-run runs only the block's pending tasks,
// still as a block when more than one is pending, and skips a block whose
// tasks are all done.
func TestResumeInsideABlock(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		done  []int
		calls []string
		block bool
	}{
		{"two pending run as a block", []int{1, 2}, []string{"execute:3", "execute:4", "plan:3", "plan:4"}, true},
		{"every task done", []int{1, 2, 3, 4}, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, parallelPlan("sppp"))
			writeState(t, h, tc.done)
			out, err := h.run("PEAL_PARALLEL=true")
			if err != nil || out.ExitCode != 0 {
				t.Fatalf("err %v, outcome %+v", err, out)
			}
			calls := strings.Fields(h.keys())
			slices.Sort(calls)
			if !slices.Equal(calls, tc.calls) || strings.Contains(h.log.String(), "parallel block started") != tc.block {
				t.Fatalf("calls %q; log:\n%s", h.keys(), h.log)
			}
			if !slices.Equal(h.state().CompletedTaskIndices, []int{1, 2, 3, 4}) {
				t.Fatalf("state %+v", h.state())
			}
		})
	}
}

// TestBlockFailureStopsNewStarts: with two slots, task 1 ends at once and
// task 3 takes its slot; task 2 fails while task 3 runs. Task 3 finishes and
// is kept although it comes after the failure; tasks 4 to 6 never start.
func TestBlockFailureStopsNewStarts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, parallelPlan("pppppp"))
	running3, gate2, gate3 := readyPipe(t), gatePipe(t), gatePipe(t)
	h.scenario(map[string][]fakes.Outcome{
		"execute:2": {gatedFail(gate2)},
		"execute:3": {{WriteFiles: signals(running3), WaitFile: gate3}},
	})
	run := startRun(h, "PEAL_MAX_PARALLEL=2")
	// Task 2 fails once task 3 runs; task 3 ends once the block has declined
	// task 4, the task that task 2's freed slot would take.
	waitReady(t, running3)
	openGate(t, gate2)
	run.events.wait(t, "task 4 not started after task 2 failed", 1, taskNotStarted(4))
	openGate(t, gate3)
	_, err := run.wait(t)
	var te *TaskError
	if !errors.As(err, &te) || te.Index != 2 {
		t.Fatalf("err = %v", err)
	}
	want := []string{"execute:1", "execute:2", "execute:3", "plan:1", "plan:2", "plan:3"}
	if got := sortedKeys(h); !slices.Equal(got, want) {
		t.Fatalf("calls %q, want %q", got, want)
	}
	spans := agentSpans(h)
	failed, running := span(t, spans, "execute:2"), span(t, spans, "execute:3")
	if !running.start.Before(failed.end) || !failed.end.Before(running.end) {
		t.Fatalf("task 3 was not running when task 2 failed: %+v, %+v", failed, running)
	}
	if !slices.Equal(h.state().CompletedTaskIndices, []int{1, 3}) {
		t.Fatalf("state %+v", h.state())
	}
	if _, found := h.summary(); found {
		t.Fatal("a hard failure must not write a run summary")
	}
}

func TestBlockContinueWithRemainingTasks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, parallelPlan("pppp"))
	h.scenario(map[string][]fakes.Outcome{"plan:2": {fail}})
	out, err := h.run("PEAL_MAX_PARALLEL=2", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true")
	if err != nil {
		t.Fatal(err)
	}
	if out.ExitCode != ExitWithIssues || !slices.Equal(out.Failed, []int{2}) || !slices.Equal(out.Completed, []int{1, 3, 4}) {
		t.Fatalf("outcome %+v", out)
	}
	want := []string{"execute:1", "execute:3", "execute:4", "plan:1", "plan:2", "plan:3", "plan:4"}
	if got := sortedKeys(h); !slices.Equal(got, want) {
		t.Fatalf("calls %q", got)
	}
	if !slices.Equal(h.state().CompletedTaskIndices, []int{1, 3, 4}) {
		t.Fatalf("state %+v", h.state())
	}
	if sum, _ := h.summary(); sum.ExitCode != ExitWithIssues || !slices.Equal(sum.TasksFailed, []int{2}) {
		t.Fatalf("summary %+v", sum)
	}
}

// TestBlockConsecutiveFailures: a block's outcomes count toward
// max_consecutive_task_failures in index order, not in the order they end.
func TestBlockConsecutiveFailures(t *testing.T) {
	t.Parallel()
	capped := []string{"PEAL_CONTINUE_WITH_REMAINING_TASKS=true", "PEAL_MAX_CONSECUTIVE_TASK_FAILURES=2"}

	t.Run("stops at the cap and keeps later successes", func(t *testing.T) {
		h := newHarness(t, parallelPlan("ppppp"))
		// Tasks 2 and 3 fail only once tasks 1, 4 and 5 run: the certain
		// stop must not be what keeps them from starting.
		rules := map[string][]fakes.Outcome{}
		var readies, gates []string
		for _, task := range []int{1, 4, 5} {
			r := readyPipe(t)
			readies = append(readies, r)
			rules[fmt.Sprintf("plan:%d", task)] = []fakes.Outcome{{WriteFiles: signals(r)}}
		}
		for _, task := range []int{2, 3} {
			g := gatePipe(t)
			gates = append(gates, g)
			rules[fmt.Sprintf("plan:%d", task)] = []fakes.Outcome{gatedFail(g)}
		}
		h.scenario(rules)
		run := startRun(h, append(capped, "PEAL_MAX_PARALLEL=5")...)
		holdAllThenRelease(t, readies, gates)
		_, err := run.wait(t)
		var se *StoppedError
		var te *TaskError
		if !errors.As(err, &se) || se.Failures != 2 || !errors.As(err, &te) || te.Index != 3 {
			t.Fatalf("err = %v", err)
		}
		// Tasks 4 and 5 come after the stop but their work is done: kept.
		if !slices.Equal(h.state().CompletedTaskIndices, []int{1, 4, 5}) {
			t.Fatalf("state %+v", h.state())
		}
	})

	t.Run("failures that end one after the other are not consecutive", func(t *testing.T) {
		h := newHarness(t, parallelPlan("ppppp"))
		gate3 := gatePipe(t)
		h.scenario(map[string][]fakes.Outcome{"plan:2": {fail}, "plan:4": {fail}, "execute:3": {{WaitFile: gate3}}})
		run := startRun(h, append(capped, "PEAL_MAX_PARALLEL=5")...)
		// Task 3 ends only once the agents of tasks 2 and 4, the only
		// failing calls, have failed and exited.
		run.events.wait(t, "the failed plans of tasks 2 and 4", 2, callFailed("plan"))
		openGate(t, gate3)
		out, err := run.wait(t)
		if err != nil {
			t.Fatal(err)
		}
		spans := agentSpans(h)
		if last := span(t, spans, "execute:3").end; !span(t, spans, "plan:2").end.Before(last) || !span(t, spans, "plan:4").end.Before(last) {
			t.Fatal("tasks 2 and 4 did not both fail before task 3 ended")
		}
		if out.ExitCode != ExitWithIssues || !slices.Equal(out.Failed, []int{2, 4}) || !slices.Equal(out.Completed, []int{1, 3, 5}) {
			t.Fatalf("outcome %+v", out)
		}
	})

	t.Run("a certain stop starts no more tasks", func(t *testing.T) {
		// Task 1 (sequential) fails; in the block, task 2's failure makes
		// two in a row while task 3 still runs.
		h := newHarness(t, parallelPlan("sppppp"))
		running3, gate2, gate3 := readyPipe(t), gatePipe(t), gatePipe(t)
		h.scenario(map[string][]fakes.Outcome{
			"plan:1":    {fail},
			"plan:2":    {gatedFail(gate2)},
			"execute:3": {{WriteFiles: signals(running3), WaitFile: gate3}},
		})
		run := startRun(h, append(capped, "PEAL_MAX_PARALLEL=2")...)
		// Task 2 fails once task 3 runs; task 3 ends once the block has
		// declined task 4.
		waitReady(t, running3)
		openGate(t, gate2)
		run.events.wait(t, "task 4 not started after task 2 failed", 1, taskNotStarted(4))
		openGate(t, gate3)
		_, err := run.wait(t)
		var se *StoppedError
		if !errors.As(err, &se) || se.Failures != 2 {
			t.Fatalf("err = %v", err)
		}
		want := []string{"execute:3", "plan:1", "plan:2", "plan:3"}
		if got := sortedKeys(h); !slices.Equal(got, want) {
			t.Fatalf("calls %q, want %q", got, want)
		}
		if !slices.Equal(h.state().CompletedTaskIndices, []int{3}) {
			t.Fatalf("state %+v", h.state())
		}
	})
}

func TestBlockCommit(t *testing.T) {
	t.Parallel()
	writes := func(task int) []fakes.Outcome {
		return []fakes.Outcome{{WriteFiles: map[string]string{fmt.Sprintf("%d.txt", task): "x"}}}
	}
	cases := []struct {
		name    string
		env     []string
		rules   map[string][]fakes.Outcome
		subject string
		files   string
	}{
		{"one commit for the block", nil,
			map[string][]fakes.Outcome{"plan:2": {{Stdout: "\nBuild the second part\nin detail"}}},
			"peal: tasks 2, 3, 4 - Build the second part", "2.txt 3.txt 4.txt"},
		{"only the successes", []string{"PEAL_CONTINUE_WITH_REMAINING_TASKS=true"},
			map[string][]fakes.Outcome{"plan:2": {fail}, "plan:3": {{Stdout: "Third part first"}}},
			"peal: tasks 3, 4 - Third part first", "3.txt 4.txt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, parallelPlan("sppp"))
			testgit.Git(t, h.repo, "commit", "-q", "--allow-empty", "-m", "root")
			rules := map[string][]fakes.Outcome{}
			for task := 1; task <= 4; task++ {
				rules[fmt.Sprintf("execute:%d", task)] = writes(task)
			}
			for k, v := range tc.rules {
				rules[k] = v
			}
			h.scenario(rules)
			if _, err := h.run(append(tc.env, "PEAL_COMMIT_AFTER_PHASE2=true", "PEAL_MAX_PARALLEL=3", "PEAL_PARALLEL_ISOLATION=shared")...); err != nil {
				t.Fatal(err)
			}
			subjects := strings.Split(testgit.Git(t, h.repo, "log", "--format=%s"), "\n")
			want := []string{tc.subject, "peal: task 1 - fake plan output for task 1", "root"}
			if !slices.Equal(subjects, want) {
				t.Fatalf("commits %q, want %q", subjects, want)
			}
			if files := strings.Fields(testgit.Git(t, h.repo, "show", "--name-only", "--format=", "HEAD")); strings.Join(files, " ") != tc.files {
				t.Fatalf("block commit holds %q, want %q", files, tc.files)
			}
		})
	}
}

// TestBlockTaskPanic: task 2 panics once task 3 has started (a channel, so
// that the stop cannot keep task 3 from starting); task 2 fails, the others
// complete.
func TestBlockTaskPanic(t *testing.T) {
	t.Parallel()
	panicAfterTask3 := func(h *harness) {
		started3 := make(chan struct{})
		h.extra = append(h.extra, withTaskStart(func(task plan.Task) {
			switch task.Index {
			case 3:
				close(started3)
			case 2:
				<-started3
				panic("boom")
			}
		}))
	}

	t.Run("continue", func(t *testing.T) {
		h := newHarness(t, parallelPlan("ppp"))
		panicAfterTask3(h)
		out, err := h.run("PEAL_MAX_PARALLEL=3", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(out.Failed, []int{2}) || !slices.Equal(out.Completed, []int{1, 3}) || strings.Contains(h.keys(), ":2") {
			t.Fatalf("outcome %+v, calls %q", out, h.keys())
		}
		if !strings.Contains(h.log.String(), "task panicked") {
			t.Fatalf("the panic is not logged:\n%s", h.log)
		}
	})
	t.Run("stop", func(t *testing.T) {
		h := newHarness(t, parallelPlan("ppp"))
		panicAfterTask3(h)
		_, err := h.run("PEAL_MAX_PARALLEL=3")
		var te *TaskError
		if !errors.As(err, &te) || te.Index != 2 || !strings.Contains(err.Error(), "panic: boom") {
			t.Fatalf("err = %v", err)
		}
		if !slices.Equal(h.state().CompletedTaskIndices, []int{1, 3}) {
			t.Fatalf("state %+v", h.state())
		}
	})
}

// TestBlockInterrupted: three agents hang in a block of four on three
// slots; task 4 can only have started once task 1 was done. Cancelling
// stops every agent and keeps task 1.
func TestBlockInterrupted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, parallelPlan("pppp"))
	pipes := map[int]string{}
	rules := map[string][]fakes.Outcome{}
	for _, task := range []int{2, 3, 4} {
		pipes[task] = readyPipe(t)
		rules[fmt.Sprintf("execute:%d", task)] = []fakes.Outcome{{WriteFiles: map[string]string{pipes[task]: "x"}, Hang: true}}
	}
	h.scenario(rules)
	cfg := h.config("PEAL_MAX_PARALLEL=3")
	r := startCfg(h, cfg)
	for _, task := range []int{2, 3, 4} {
		waitReady(t, pipes[task])
	}
	r.cancel(errors.New("SIGINT"))
	if _, err := r.wait(t); !isInterrupted(err) {
		t.Fatalf("err = %v", err)
	}
	for _, c := range h.calls() {
		if c.ID().Alive() {
			t.Errorf("agent %s (pid %d) alive after the interruption", c.Key, c.ID().Host())
		}
	}
	if !slices.Equal(h.state().CompletedTaskIndices, []int{1}) {
		t.Fatalf("state %+v", h.state())
	}
	// Every ticket agrees with state.json: task 1 finished before the
	// signal and is closed; the interrupted ones stay in progress for a
	// re-run to resume.
	if a := lastAttempt(t, h, ticketOf(cfg, 1)); a.Status != tickets.AttemptClosed {
		t.Fatalf("task 1's ticket is %s", a.Status)
	}
	for _, task := range []int{2, 3, 4} {
		if a := lastAttempt(t, h, ticketOf(cfg, task)); a.Status != tickets.AttemptInProgress {
			t.Fatalf("task %d's ticket is %s", task, a.Status)
		}
	}
}

// ticketOf is the ticket of a task in a run of cfg.
func ticketOf(cfg *config.Config, task int) string { return cfg.Ticket(strconv.Itoa(task)) }

// TestSignalAfterTheLastCall: a signal that arrives while a block finishes,
// after every call has ended, still ends the run as interrupted (never exit
// 0), and the tickets agree with state.json.
func TestSignalAfterTheLastCall(t *testing.T) {
	t.Parallel()
	h := newHarness(t, parallelPlan("pp"))
	cfg := h.config("PEAL_MAX_PARALLEL=2")
	ctx, cancel := context.WithCancelCause(context.Background())
	calls := 0
	var mu sync.Mutex
	obs := &onCallEnd{fn: func(info phase.CallInfo) {
		mu.Lock()
		defer mu.Unlock()
		if calls++; calls == 4 { // the last of plan:1 execute:1 plan:2 execute:2
			cancel(errors.New("SIGINT"))
		}
	}}
	_, err := Run(ctx, cfg, slog.New(slog.DiscardHandler), h.opts(WithObserver(obs))...)
	if !isInterrupted(err) {
		t.Fatalf("err = %v, want an interruption", err)
	}
	if !slices.Equal(h.state().CompletedTaskIndices, []int{1, 2}) {
		t.Fatalf("state %+v", h.state())
	}
	for _, task := range []int{1, 2} {
		if a := lastAttempt(t, h, ticketOf(cfg, task)); a.Status != tickets.AttemptClosed {
			t.Fatalf("task %d's ticket is %s", task, a.Status)
		}
	}
}

// onCallEnd is an Observer that calls fn when an agent call ends.
type onCallEnd struct{ fn func(phase.CallInfo) }

func (o *onCallEnd) PlanLoaded(int) {}
func (o *onCallEnd) CallStarted(info phase.CallInfo) func() {
	if info.Attempt.Role == "" {
		return nil
	}
	return func() { o.fn(info) }
}

// stetRunSpans pairs the fake stet's start and end records of `stet run` by pid.
func stetRunSpans(h *harness) []agentSpan {
	h.t.Helper()
	records, err := fakes.ReadStetCalls(h.stetDir)
	if err != nil {
		h.t.Fatal(err)
	}
	ends := map[procs.ID]time.Time{}
	for _, c := range records {
		if c.Event == fakes.EventEnd {
			ends[c.ID()] = c.Time
		}
	}
	var spans []agentSpan
	for _, c := range records {
		if c.Event == fakes.EventStart && c.Cmd == "run" {
			spans = append(spans, agentSpan{key: "stet run", pid: c.ID(), start: c.Time, end: ends[c.ID()]})
		}
	}
	return spans
}

// TestBlockReviewAfterLastExecute: the tasks of a block share one
// commit and one review, which starts only once the block's last execute has
// ended; its address calls carry the lowest index; the block's tasks
// complete after the review.
func TestBlockReviewAfterLastExecute(t *testing.T) {
	t.Parallel()
	h := newHarness(t, parallelPlan("pppp"))
	env := h.withStet(fakes.StetScenario{})
	h.scenario(map[string][]fakes.Outcome{
		"execute:1": {{SleepMS: 600, Plant: twoFindings()[:1]}},
		"execute:3": {{SleepMS: 300, Plant: twoFindings()[1:]}},
		"address":   {{StetFix: -1}},
	})
	out, err := h.run(append(env, "PEAL_MAX_PARALLEL=4", "PEAL_PARALLEL_ISOLATION=shared")...)
	if err != nil {
		t.Fatal(err)
	}
	spans := agentSpans(h)
	var lastExecute time.Time
	var phase3 []string
	for _, s := range spans {
		if strings.HasPrefix(s.key, "execute:") && s.end.After(lastExecute) {
			lastExecute = s.end
		}
	}
	for _, s := range spans {
		if strings.HasPrefix(s.key, "triage:") || strings.HasPrefix(s.key, "address:") {
			phase3 = append(phase3, s.key)
			if !s.start.After(lastExecute) {
				t.Errorf("%s started before the block's last execute ended", s.key)
			}
		}
	}
	if !slices.Equal(phase3, []string{"triage:1", "address:1"}) {
		t.Fatalf("Phase 3 agent calls %q", phase3)
	}
	if want := "status; start SHA; run --output=json --stream; run --output=json; run --output=json --stream; run --output=json; finish"; h.stetCmds() != want {
		t.Fatalf("stet %q, want %q", h.stetCmds(), want)
	}
	runs := stetRunSpans(h)
	if maxAlive(runs) != 1 {
		t.Fatalf("stet runs overlap: %v", runs)
	}
	for _, r := range runs {
		if !r.start.After(lastExecute) {
			t.Fatalf("a stet run started before the block's last execute ended: %v, last execute %v", r, lastExecute)
		}
	}
	if got := strings.Join(h.commits(), "|"); got != "root|peal: tasks 1, 2, 3, 4 - fake plan output for task 1|peal: tasks 1, 2, 3, 4 - address round 1" {
		t.Fatalf("commits %q", got)
	}
	if !slices.Equal(out.Completed, []int{1, 2, 3, 4}) || !slices.Equal(h.state().CompletedTaskIndices, []int{1, 2, 3, 4}) {
		t.Fatalf("outcome %+v, state %+v", out, h.state())
	}
}

// TestBlockReviewFailure: the block's review decides for every task
// whose execute succeeded: when it fails, none of them is completed; a task
// whose execute failed fails on its own.
func TestBlockReviewFailure(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		env           []string
		stet          fakes.StetScenario
		wantErr       bool
		wantFailed    []int
		wantCompleted []int
	}{
		{"review fails, continue", []string{"PEAL_CONTINUE_WITH_REMAINING_TASKS=true"},
			fakes.StetScenario{Rules: map[string][]fakes.Outcome{"run": {{Hang: true}}}}, false, []int{1, 2, 3}, nil},
		{"review fails, stop", nil, fakes.StetScenario{Rules: map[string][]fakes.Outcome{"run": {{Hang: true}}}}, true, nil, nil},
		{"an execute fails, the review passes", []string{"PEAL_CONTINUE_WITH_REMAINING_TASKS=true"}, fakes.StetScenario{}, false, []int{2}, []int{1, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, parallelPlan("ppp"))
			env := h.withStet(tc.stet)
			h.scenario(map[string][]fakes.Outcome{"execute:2": {{Exit: 1, Stderr: "broke"}}})
			if !strings.Contains(tc.name, "an execute fails") {
				h.scenario(nil)
			}
			out, err := h.run(append(append(env, tc.env...), "PEAL_MAX_PARALLEL=3", "PEAL_PHASE_TIMEOUT_SEC=1")...)
			var te *TaskError
			if tc.wantErr != (err != nil) || (err != nil && (!errors.As(err, &te) || te.Index != 1)) {
				t.Fatalf("err = %v", err)
			}
			if !tc.wantErr && (!slices.Equal(out.Failed, tc.wantFailed) || !slices.Equal(out.Completed, tc.wantCompleted)) {
				t.Fatalf("outcome %+v", out)
			}
			if !slices.Equal(h.state().CompletedTaskIndices, tc.wantCompleted) {
				t.Fatalf("state %+v", h.state())
			}
		})
	}
}

// TestBlockStopSavesDeferrals: when a block's task fails and stops the run,
// the block's other tasks keep the outcome of the shared review in
// state.json: deferred under on_findings_remaining = defer, so that the next
// run tries them again rather than taking them for completed or new.
func TestBlockStopSavesDeferrals(t *testing.T) {
	t.Parallel()
	h := newHarness(t, parallelPlan("ppp"))
	env := h.withStet(fakes.StetScenario{})
	h.scenario(map[string][]fakes.Outcome{
		"execute:1": {{Exit: 1, Stderr: "broke"}},
		"execute:3": plants(twoFindings()...),
	})
	_, err := h.run(append(env, "PEAL_MAX_PARALLEL=3", "PEAL_PARALLEL_ISOLATION=shared", "PEAL_ON_FINDINGS_REMAINING=defer", "PEAL_MAX_ADDRESS_ROUNDS=1", "PEAL_STET_DISABLE_LLM_TRIAGE=true")...)
	var te *TaskError
	if !errors.As(err, &te) || te.Index != 1 {
		t.Fatalf("err = %v", err)
	}
	if st := h.state(); len(st.CompletedTaskIndices) != 0 || !slices.Equal(st.DeferredTaskIndices, []int{2, 3}) {
		t.Fatalf("state %+v", st)
	}
}

// TestBlockReviewPanic: a panic in a parallel block's Phase 3 is the
// block's failure, as in its Phases 1-2 and in a sequential task, not a
// crash of peal; the tickets record the failure.
func TestBlockReviewPanic(t *testing.T) {
	t.Parallel()
	h := newHarness(t, parallelPlan("pp"))
	testgit.Git(t, h.repo, "commit", "-q", "--allow-empty", "-m", "root")
	env := h.withStet(fakes.StetScenario{})
	h.scenario(map[string][]fakes.Outcome{"execute:1": plants(twoFindings()...)})
	h.extra = append(h.extra, func(s *settings) {
		s.callStart = func(name phase.Name, task int) {
			if name == "address" {
				panic("boom in review")
			}
		}
	})
	out, err := h.run(append(env, "PEAL_MAX_PARALLEL=2", "PEAL_PARALLEL_ISOLATION=shared", "PEAL_CONTINUE_WITH_REMAINING_TASKS=true", "PEAL_STET_DISABLE_LLM_TRIAGE=true")...)
	if err != nil || !slices.Equal(out.Failed, []int{1, 2}) {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
	cfg := h.config()
	for _, task := range []int{1, 2} {
		if a := lastAttempt(t, h, ticketOf(cfg, task)); a.Status != tickets.AttemptError {
			t.Fatalf("task %d's ticket is %s", task, a.Status)
		}
	}
}
