package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"peal/phase"
)

// stopSignals end a run: the first one stops it gracefully (agents get
// SIGTERM, then SIGKILL after the kill grace; state saved; cleanup calls
// capped), a second one at once (SIGKILL, no more waiting).
var stopSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// signals is how the process's signals reach the run.
type signals struct {
	ctx     context.Context // cancelled by the first stop, its cause a *signalCause
	cancel  context.CancelCauseFunc
	hard    context.CancelFunc // the second stop
	hardCtx context.Context
	ch      chan os.Signal
	pipe    chan os.Signal
	once    sync.Once
	stopped chan struct{}
	mu      sync.Mutex // one stop at a time: the first cancels, a second is hard
}

func watchSignals() *signals {
	ctx, cancel := context.WithCancelCause(context.Background())
	hardCtx, hard := context.WithCancel(context.Background())
	s := &signals{ctx: phase.WithHardStop(ctx, hardCtx), cancel: cancel, hard: hard, hardCtx: hardCtx,
		ch: make(chan os.Signal, 4), pipe: make(chan os.Signal, 1), stopped: make(chan struct{})}
	signal.Notify(s.ch, stopSignals...)
	// Catching SIGPIPE turns a write to a pipe nobody reads into an EPIPE
	// error, on peal's own stdout and stderr too, instead of death; unlike
	// ignoring it, catching does not pass on to the agents peal starts.
	signal.Notify(s.pipe, syscall.SIGPIPE)
	go func() {
		for {
			select {
			case <-s.pipe:
			case <-s.stopped:
				return
			}
		}
	}()
	go func() {
		for {
			select {
			case sig := <-s.ch:
				s.stop(sig.(syscall.Signal))
			case <-s.stopped:
				return
			}
		}
	}()
	return s
}

// stop ends the run with sig as the cause; a second stop is a hard one.
func (s *signals) stop(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		s.hard()
		return
	}
	s.cancel(&signalCause{sig: sig})
}

// lose ends the run because peal's output lost its reader: a graceful stop
// like a hangup's, never a hard one (stdout and stderr may both go).
func (s *signals) lose() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() == nil {
		s.cancel(&signalCause{sig: syscall.SIGPIPE})
	}
}

// signalCause is the cause of a context cancelled by a signal (or by the
// loss of peal's output, as SIGPIPE).
type signalCause struct{ sig syscall.Signal }

func (s *signalCause) Error() string { return "received " + signalName(s.sig) }

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	}
	return sig.String()
}

// outputGuard is peal's stdout or stderr: once a write fails because the
// reader has gone, lost is called (once) and later writes are dropped, so
// that no log line can fail the run while it stops its agents.
type outputGuard struct {
	mu   sync.Mutex
	w    io.Writer
	lost func()
	gone bool
}

func (g *outputGuard) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gone {
		return len(p), nil
	}
	n, err := g.w.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		g.gone = true
		go g.lost()
		return len(p), nil
	}
	return n, err
}

// Fd lets the terminal checks see the file behind the guard.
func (g *outputGuard) Fd() uintptr {
	if f, ok := g.w.(*os.File); ok {
		return f.Fd()
	}
	return ^uintptr(0)
}
