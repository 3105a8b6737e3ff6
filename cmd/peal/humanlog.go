package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"golang.org/x/term"

	"peal/internal/text"
)

// humanHandler writes the log for a person at a terminal: a record a
// line, as wide as the terminal at most: the time, the level, the task and
// phase it concerns, the event, then its details. A record longer than the
// width goes on over the lines below, indented under its event, broken
// between words where it can: nothing of it is lost.
//
//	14:02:07 INFO  task 2 execute: starting call  attempt="attempt 1 of 3"
//	               argv="[agent --print …]"
type humanHandler struct {
	mu    *sync.Mutex
	out   io.Writer
	level slog.Leveler
	width func() int // columns; 0 when unknown
	attrs []slog.Attr
	group string // prefix of the keys of later attributes ("" or "g.")
}

// defaultWidth is the width of a line when the terminal does not say.
const defaultWidth = 100

func newHumanHandler(out io.Writer, level slog.Leveler, width func() int) *humanHandler {
	return &humanHandler{mu: &sync.Mutex{}, out: out, level: level, width: width}
}

func (h *humanHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *humanHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = slices.Clip(c.attrs)
	for _, a := range attrs {
		a.Key = h.group + a.Key
		c.attrs = append(c.attrs, a)
	}
	return &c
}

func (h *humanHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.group += name + "."
	return &c
}

func (h *humanHandler) Handle(_ context.Context, r slog.Record) error {
	attrs := slices.Clone(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		a.Key = h.group + a.Key
		attrs = append(attrs, a)
		return true
	})
	var task, phase string
	var details []string
	for _, a := range attrs {
		if a.Equal(slog.Attr{}) {
			continue // slog's rule: an empty attribute is no attribute
		}
		a.Value = a.Value.Resolve()
		switch {
		case a.Key == "task" && task == "":
			task = "task " + value(a.Value)
		case a.Key == "phase" && phase == "":
			phase = value(a.Value)
		case a.Value.Kind() == slog.KindGroup:
			for _, g := range a.Value.Group() {
				details = append(details, a.Key+"."+g.Key+"="+quoted(value(g.Value.Resolve())))
			}
		default:
			details = append(details, a.Key+"="+quoted(value(a.Value)))
		}
	}
	var b strings.Builder
	if !r.Time.IsZero() {
		b.WriteString(r.Time.Local().Format("15:04:05 "))
	}
	fmt.Fprintf(&b, "%-5s ", levelName(r.Level))
	indent := b.Len() // the lines a record goes on over start under its event
	switch {
	case task != "" && phase != "":
		b.WriteString(task + " " + phase + ": ")
	case task != "" || phase != "":
		b.WriteString(task + phase + ": ")
	}
	b.WriteString(r.Message)
	if len(details) > 0 {
		b.WriteString("  " + strings.Join(details, " "))
	}
	width := defaultWidth
	if h.width != nil {
		if w := h.width(); w > 0 {
			width = w
		}
	}
	// The last column stays free: a terminal that wraps at it would
	// otherwise add an empty line.
	line := strings.Join(text.Wrap(printable(b.String()), max(width-1, 8), indent), "\n") + "\n"
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.out, line)
	return err
}

// levelName is a level as the human lines show it.
func levelName(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "ERROR"
	case l >= slog.LevelWarn:
		return "WARN"
	case l >= slog.LevelInfo:
		return "INFO"
	}
	return "DEBUG"
}

// value is an attribute's value as text, durations in seconds.
func value(v slog.Value) string {
	if v.Kind() == slog.KindDuration {
		return formatDuration(v.Duration())
	}
	if v.Kind() == slog.KindTime {
		return v.Time().Format(time.RFC3339)
	}
	return v.String()
}

// quoted is s, quoted when it is empty or holds a space, = or a quote.
func quoted(s string) string {
	if s == "" || strings.ContainsAny(s, " =\"") {
		return strconv.Quote(s)
	}
	return s
}

// printable is s on one line: line breaks and other control characters
// shown escaped, so that no escape sequence reaches the terminal.
func printable(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteByte(' ')
		case unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// terminalWidth is the width of the terminal behind w, when it is one:
// ok reports whether it is.
func terminalWidth(w io.Writer) (width func() int, ok bool) {
	f, isFile := w.(interface{ Fd() uintptr })
	if !isFile || !term.IsTerminal(int(f.Fd())) {
		return nil, false
	}
	return func() int {
		cols, _, err := term.GetSize(int(f.Fd()))
		if err != nil {
			return 0
		}
		return cols
	}, true
}
