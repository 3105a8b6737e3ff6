package main

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"peal/phase"
)

// progress draws one status line per running call below the log on a
// terminal, redrawn in place about once a second. Log lines reach the
// terminal through Write, which clears the status lines, prints the log line
// and draws them again, so the two never garble each other. It implements
// runner.Observer; it never sees a prompt (phase.CallInfo carries none).
type progress struct {
	mu      sync.Mutex
	out     io.Writer
	width   func() int // columns of the terminal, 0 when unknown
	now     func() time.Time
	tasks   int         // tasks in the plan; 0 until the plan is loaded
	calls   []*liveCall // running calls by task, then in the order they started
	drawn   int         // status lines on the screen now, each ended by a newline
	partial bool        // the last log write did not end a line: drawing would join it
	closed  bool
	ticking bool // a tick goroutine runs, and closes done when it stops

	stop chan struct{}
	done chan struct{}
}

type liveCall struct{ info phase.CallInfo }

// progressTick is how often the elapsed times are redrawn.
const progressTick = time.Second

// newProgress starts a progress display on out; Close stops it.
func newProgress(out io.Writer, width func() int) *progress {
	p := newProgressAt(out, width, time.Now)
	p.ticking = true
	go p.tick()
	return p
}

// newProgressAt is a display without its ticker: it draws on events only,
// with the given clock (tests drive it through redraw).
func newProgressAt(out io.Writer, width func() int, now func() time.Time) *progress {
	return &progress{out: out, width: width, now: now, stop: make(chan struct{}), done: make(chan struct{})}
}

func (p *progress) tick() {
	defer close(p.done)
	t := time.NewTicker(progressTick)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.redraw()
		}
	}
}

// PlanLoaded records the n of "task i/n".
func (p *progress) PlanLoaded(tasks int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tasks = tasks
}

// CallStarted shows a line for the call until the returned function runs.
func (p *progress) CallStarted(info phase.CallInfo) func() {
	c := &liveCall{info: info}
	p.mu.Lock()
	// Ordered by task, so that the lines of a parallel block keep their
	// places while their calls come and go.
	i := len(p.calls)
	for i > 0 && p.calls[i-1].info.Task > info.Task {
		i--
	}
	p.calls = slices.Insert(p.calls, i, c)
	p.drawLocked(nil)
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if i := slices.Index(p.calls, c); i >= 0 {
			p.calls = slices.Delete(p.calls, i, i+1)
		}
		p.drawLocked(nil)
	}
}

// Write prints log output above the status lines.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return p.out.Write(b)
	}
	if len(b) > 0 {
		p.partial = b[len(b)-1] != '\n'
	}
	p.drawLocked(b)
	return len(b), nil
}

// redraw brings the elapsed times up to date.
func (p *progress) redraw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.calls) > 0 {
		p.drawLocked(nil)
	}
}

// Close stops the ticker and clears the status lines, leaving the terminal
// as plain log output left it. Later writes go straight through.
func (p *progress) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.calls = nil
	p.drawLocked(nil)
	p.mu.Unlock()
	close(p.stop)
	if p.ticking {
		<-p.done
	}
}

// drawLocked clears the status lines, writes logText and draws the lines of
// the running calls, all in one write so the terminal never shows a half
// state. Callers hold mu.
func (p *progress) drawLocked(logText []byte) {
	var buf bytes.Buffer
	if p.drawn > 0 {
		// Back to the first status line, then erase to the end of the screen.
		fmt.Fprintf(&buf, "\r\x1b[%dA\x1b[J", p.drawn)
		p.drawn = 0
	}
	buf.Write(logText)
	if !p.partial && !p.closed {
		width := p.width()
		if width <= 0 {
			width = 80
		}
		now := p.now()
		for _, c := range p.calls {
			buf.WriteString(fit(p.line(c.info, now), width-1))
			buf.WriteByte('\n')
			p.drawn++
		}
	}
	if buf.Len() > 0 {
		// A terminal that cannot be written to is not worth failing the run for.
		_, _ = p.out.Write(buf.Bytes())
	}
}

// line is the status of one call: task i/n, phase, attempt k of m (the same count as the log), role and
// elapsed seconds.
func (p *progress) line(c phase.CallInfo, now time.Time) string {
	var parts []string
	switch {
	case c.Task != phase.NoTask && p.tasks > 0:
		parts = append(parts, fmt.Sprintf("task %d/%d", c.Task, p.tasks))
	case c.Task != phase.NoTask:
		parts = append(parts, fmt.Sprintf("task %d", c.Task))
	}
	parts = append(parts, string(c.Phase))
	if c.Detail != nil {
		if d := c.Detail(); d != "" {
			parts = append(parts, d)
		}
	}
	parts = append(parts, c.Attempt.String())
	if c.Attempt.Role != "" {
		parts = append(parts, string(c.Attempt.Role))
	}
	parts = append(parts, fmt.Sprintf("%ds", int(now.Sub(c.Started).Seconds())))
	return "peal: " + strings.Join(parts, " | ")
}

// fit cuts s to n columns: a line that wrapped would take two rows, and the
// cursor-up count that clears the status lines would be off by one.
func fit(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:max(n, 0)])
	}
	return s
}

// progressFor returns a progress display for stderr, or nil when there must
// be none: stderr is not a terminal (CI, a pipe, a file), TERM is unset or
// "dumb" (a terminal that does not understand cursor movement), or
// --no-progress was given.
func progressFor(stderr io.Writer, environ []string, off bool) *progress {
	// A terminal is a file; peal's stderr reaches here wrapped, so ask for
	// the descriptor rather than the type.
	f, ok := stderr.(interface {
		io.Writer
		Fd() uintptr
	})
	if off || !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	if name := lookupEnv(environ, "TERM"); name == "" || name == "dumb" {
		return nil
	}
	return newProgress(f, func() int {
		width, _, err := term.GetSize(int(f.Fd()))
		if err != nil {
			return 0
		}
		return width
	})
}

// lookupEnv is the value of name in environ ("" when absent).
func lookupEnv(environ []string, name string) string {
	value := ""
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			value = v // the last one wins, as for the process environment
		}
	}
	return value
}
