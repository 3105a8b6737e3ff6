// Package agentlog owns the files of agent_log_dir: the whole output of
// every agent call attempt (and of every run of a project's check), written
// as it arrives, one file per stream.
package agentlog

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"peal/internal/owndir"
	"peal/phase"
)

// Logs writes the whole stdout and stderr of every agent call attempt to
// its own pair of files under agent_log_dir, so that what an agent printed
// past the in-memory capture, or in an attempt that was retried, can still
// be read. Files are written as the output arrives, through the sinks of
// phase.Spec; nothing here holds a stream in memory.
//
// Names are <run start>-<task>-<phase>-call-<c>-attempt-<a>.<stream>.log,
// e.g. 20260315T101502Z-task-2-execute-call-1-attempt-1.stdout.log or
// 20260315T101502Z-plan-normalize-call-1-attempt-1.stderr.log. The run's
// start time (UTC) keeps a resumed run from overwriting the files of an
// earlier one; the call number counts the calls of one task and phase in
// this run (address rounds, a plan call run again by validate_plan_text),
// and the attempt number the retries of that call.
type Logs struct {
	dir   string
	run   string // the run's start time, the prefix of every name
	log   *slog.Logger
	mu    sync.Mutex
	calls map[string]int // calls made so far, by task and phase
}

// New is the logs of a run that started at start in dir; nil when dir is
// empty: agent logs are off.
func New(dir string, start time.Time, log *slog.Logger) *Logs {
	if dir == "" {
		return nil
	}
	return &Logs{dir: dir, run: start.UTC().Format("20060102T150405Z"), log: log, calls: map[string]int{}}
}

// Call is the files of one agent call, across its attempts.
type Call struct {
	l     *Logs
	base  string // name without the attempt and stream
	files []*logFile
}

// Call numbers the next call of phase for task. On a nil *Logs it
// returns nil, whose methods do nothing.
func (l *Logs) Call(phaseName phase.Name, task int) *Call {
	if l == nil {
		return nil
	}
	who := "plan" // calls of no task (normalize) concern the plan as a whole
	if task != phase.NoTask {
		who = "task-" + strconv.Itoa(task)
	}
	key := who + "-" + string(phaseName)
	l.mu.Lock()
	l.calls[key]++
	n := l.calls[key]
	l.mu.Unlock()
	return &Call{l: l, base: fmt.Sprintf("%s-%s-call-%d", l.run, key, n)}
}

// Attach points spec's sinks at fresh files for attempt n. The files of the
// previous attempt are closed first: attempts of a call never overlap. A
// file that cannot be created is a warning and that stream goes unlogged;
// the call itself goes on.
func (c *Call) Attach(spec *phase.Spec, n int) {
	if !c.fresh() {
		return
	}
	for _, stream := range []struct {
		name string
		sink *io.Writer
	}{{"stdout", &spec.StdoutSink}, {"stderr", &spec.StderrSink}} {
		if lf := c.open(fmt.Sprintf("attempt-%d.%s", n, stream.name)); lf != nil {
			*stream.sink = lf
		}
	}
}

// Combined opens the one file of a call whose output is a single
// stream (a check's stdout and stderr together) and returns it, or nil
// when it cannot be created (a warning: the call goes on unlogged).
func (c *Call) Combined() io.Writer {
	if !c.fresh() {
		return nil
	}
	if lf := c.open("attempt-1.output"); lf != nil {
		return lf
	}
	return nil
}

// fresh closes the files of the previous attempt and makes the folder;
// false when the call is not logged (no agent_log_dir, or a folder that
// cannot be made: a warning).
func (c *Call) fresh() bool {
	if c == nil {
		return false
	}
	c.Close()
	if err := owndir.Make(c.l.dir); err != nil {
		c.l.log.Warn("agent log folder cannot be created; this call is not logged", "agent_log_dir", c.l.dir, "err", err)
		return false
	}
	return true
}

// open creates the file <base>-<suffix>.log of the call; nil when it
// cannot be (a warning: that stream goes unlogged). O_EXCL: a file of
// another run that started in the same second is never overwritten.
func (c *Call) open(suffix string) *logFile {
	path := filepath.Join(c.l.dir, c.base+"-"+suffix+".log")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		c.l.log.Warn("agent log file cannot be created; this stream is not logged", "path", path, "err", err)
		return nil
	}
	lf := &logFile{f: f, log: c.l.log}
	c.files = append(c.files, lf)
	return lf
}

// Close closes the files of the latest attempt.
func (c *Call) Close() {
	if c == nil {
		return
	}
	for _, f := range c.files {
		f.close()
	}
	c.files = nil
}

// logFile is one agent log file. A failed write (a full disk) is reported
// once and ends that file, never the call.
type logFile struct {
	f      *os.File
	log    *slog.Logger
	failed bool
}

func (w *logFile) Write(p []byte) (int, error) {
	if w.failed {
		return len(p), nil
	}
	if _, err := w.f.Write(p); err != nil {
		w.failed = true
		w.log.Warn("agent log file cannot be written; the rest of this stream is not logged", "path", w.f.Name(), "err", err)
	}
	return len(p), nil
}

func (w *logFile) close() {
	if err := w.f.Close(); err != nil && !w.failed {
		w.log.Warn("agent log file cannot be closed", "path", w.f.Name(), "err", err)
	}
}

// Name is the file's path, which the run record keeps with the call.
func (w *logFile) Name() string { return w.f.Name() }
