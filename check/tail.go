package check

import (
	"bytes"
	"fmt"
	"io"
	"peal/internal/text"
	"strings"
	"unicode"
	"unicode/utf8"
)

// What a check's output is cut to: its last maxTailLines lines, and no more
// than maxTailBytes of them, enough for a failing test's report and small
// enough for any prompt.
const (
	maxTailLines = 200
	maxTailBytes = 32 << 10
	// keepRaw is how much of the raw output is held while the check runs:
	// room for the escapes cleaning may add.
	keepRaw = 2 * maxTailBytes
	// maxLineRunes cuts a single line that would fill the tail alone.
	maxLineRunes = 4000
)

// tailWriter keeps the end of a stream, however long, and hands every
// byte on to next (the check's log file) when there is one.
type tailWriter struct {
	next    io.Writer
	buf     []byte
	dropped bool // bytes were dropped from the front of buf
}

func (w *tailWriter) Write(p []byte) (int, error) {
	if w.next != nil {
		w.next.Write(p) // the log's own failures are reported by the log
	}
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - keepRaw; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
		w.dropped = true
	}
	return len(p), nil
}

// Name is the name of the log file the output also goes to, for the run
// record ("" without one).
func (w *tailWriter) Name() string {
	if f, ok := w.next.(interface{ Name() string }); ok {
		return f.Name()
	}
	return ""
}

// text is the tail: the last lines of the output, cleaned (colours
// removed, carriage returns read as line ends, other control characters
// escaped as \xNN), at most MaxTailLines lines and MaxTailBytes bytes;
// and whether the output was longer.
func (w *tailWriter) text() (string, bool) {
	raw := w.buf
	cut := w.dropped
	if cut {
		// The first line was cut at the front: it goes.
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			raw = raw[i+1:]
		} else {
			raw = nil
		}
	}
	lines := strings.Split(clean(string(raw)), "\n")
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for i, l := range lines {
		if r := []rune(l); len(r) > maxLineRunes {
			lines[i] = string(r[:maxLineRunes]) + "…"
		}
	}
	if len(lines) > maxTailLines {
		lines, cut = lines[len(lines)-maxTailLines:], true
	}
	size := 0
	for i := len(lines) - 1; i >= 0; i-- {
		if size += len(lines[i]) + 1; size > maxTailBytes {
			lines, cut = lines[i+1:], true
			break
		}
	}
	return strings.Join(lines, "\n"), cut
}

// clean makes output safe to quote: terminal colours go, CRLF and a lone
// CR end lines (a progress bar's redraws become lines), invalid UTF-8 is
// replaced, and other control characters but tab are escaped as \xNN.
func clean(s string) string {
	s = text.StripTerminalCodes(s)
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	s = strings.ToValidUTF8(s, string(utf8.RuneError))
	if !strings.ContainsFunc(s, escaped) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if escaped(r) {
			fmt.Fprintf(&b, "\\x%02x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func escaped(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }

// Within is the end of tail that fits in n bytes, whole lines only (the
// last line cut at its front if it alone is longer).
func Within(tail string, n int) string {
	if len(tail) <= n {
		return tail
	}
	lines := strings.Split(tail, "\n")
	size := 0
	for i := len(lines) - 1; i >= 0; i-- {
		if size += len(lines[i]) + 1; size > n+1 {
			if i == len(lines)-1 {
				last := lines[i]
				cut := len(last) - n
				for cut < len(last) && !utf8.RuneStart(last[cut]) {
					cut++
				}
				return "…" + last[cut:]
			}
			return strings.Join(lines[i+1:], "\n")
		}
	}
	return tail
}
