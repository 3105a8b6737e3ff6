package text

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// AttemptCount is n attempts in words: "1 attempt", "3 attempts".
func AttemptCount(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

// Seconds writes a limit or a wait in seconds ("600 s"), or as a Go
// duration when it is not whole seconds.
func Seconds(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d s", int64(d/time.Second))
	}
	return d.String()
}

// maxLineLen caps a quoted line of a child's output in messages.
const maxLineLen = 300

// ansi matches terminal escape sequences: CSI (colours, cursor moves), OSC
// (titles, links) and two-character escapes.
var ansi = regexp.MustCompile(`\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])`)

// StripTerminalCodes removes colour and other terminal control sequences
// from s, and nothing else.
func StripTerminalCodes(s string) string { return ansi.ReplaceAllString(s, "") }

// Clean removes colour and other terminal control codes from s, and any
// remaining control character except newline and tab.
func Clean(s string) string {
	s = StripTerminalCodes(s)
	if !strings.ContainsFunc(s, isStrayControl) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isStrayControl(r) {
			return -1
		}
		return r
	}, s)
}

func isStrayControl(r rune) bool {
	return (unicode.IsControl(r) && r != '\n' && r != '\t') || r == utf8.RuneError
}

// Quote makes one line of output fit a one-line message: cleaned, trimmed,
// inner whitespace collapsed, and cut to a bounded length.
func Quote(line string) string {
	line = strings.Join(strings.Fields(Clean(line)), " ")
	if r := []rune(line); len(r) > maxLineLen {
		line = string(r[:maxLineLen]) + "…"
	}
	return line
}

// Snippet is the start of a child's output for a one-line message: cleaned,
// its whitespace collapsed, cut to n characters.
func Snippet(s string, n int) string {
	s = strings.Join(strings.Fields(Clean(s)), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// Meaningful reports whether a line of output can explain a failure: it has
// a letter or digit, and it is not a bare dump of an object whose text the
// program failed to print (JavaScript's "[object Object]").
func Meaningful(line string) bool {
	line = strings.TrimSpace(Clean(line))
	if line == "" || strings.HasSuffix(line, "[object Object]") {
		return false
	}
	return strings.ContainsFunc(line, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) })
}

// LastMeaningful is the last meaningful line of s, quoted; "" when none.
func LastMeaningful(s string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if Meaningful(lines[i]) {
			return Quote(lines[i])
		}
	}
	return ""
}

// Wrap breaks s, one line of text, into lines of n columns at most (a rune
// a column): the first whole, the others after indent spaces (less when n
// leaves too little room), each broken at the last space that fits, which
// it drops, or, for a word longer than a line, inside it. Nothing of s but
// those spaces is lost: a line too long for a terminal or a table's column
// is said whole over several.
func Wrap(s string, n, indent int) []string {
	n = max(n, 1)
	indent = min(indent, n/3)
	var lines []string
	rest, room, pad := []rune(s), n, ""
	for len(rest) > room {
		cut, skip := room, 0 // inside a word
		for i := room; i > 0; i-- {
			if rest[i] == ' ' {
				cut, skip = i, 1
				break
			}
		}
		lines = append(lines, pad+strings.TrimRight(string(rest[:cut]), " "))
		rest = rest[cut+skip:]
		room, pad = n-indent, strings.Repeat(" ", indent)
	}
	return append(lines, pad+string(rest))
}

// Bytes is n bytes for a person to read: "812 B", "41.0 KiB", "1.5 GiB".
func Bytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n)/unit, "KiB"
	for _, s := range []string{"MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, suffix = v/unit, s
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}

// Cap is s cut to at most n bytes on a character boundary, "…" added where
// it was cut, and invalid UTF-8 replaced: what a log shows of an output
// whose lines matter.
func Cap(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
