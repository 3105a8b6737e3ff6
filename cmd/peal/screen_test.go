package main

import (
	"strconv"
	"strings"
	"testing"
)

// screen is as much of a terminal as the progress display relies on: text,
// carriage return, newline, cursor up (ESC [ n A) and erase below / erase
// line (ESC [ J, ESC [ K, ESC [ 2 K). Feeding it what peal wrote shows what
// a person would have seen, so a test can tell lines redrawn in place from
// copies scrolled away, and intact log lines from garbled ones.
type screen struct {
	t     *testing.T
	lines [][]rune
	row   int
	col   int
}

func newScreen(t *testing.T) *screen { return &screen{t: t, lines: [][]rune{nil}} }

func (s *screen) feed(data string) {
	s.t.Helper()
	for i := 0; i < len(data); {
		switch c := data[i]; c {
		case '\r':
			s.col = 0
			i++
		case '\n':
			// A tty's output processing turns \n into \r\n (ONLCR).
			s.row++
			s.col = 0
			for len(s.lines) <= s.row {
				s.lines = append(s.lines, nil)
			}
			i++
		case 0x1b:
			i = s.escape(data, i)
		default:
			r := []rune(data[i:])[0]
			line := s.lines[s.row]
			for len(line) <= s.col {
				line = append(line, ' ')
			}
			line[s.col] = r
			s.lines[s.row] = line
			s.col++
			i += len(string(r))
		}
	}
}

// escape applies the CSI sequence at data[i] and returns the index after it.
func (s *screen) escape(data string, i int) int {
	s.t.Helper()
	if i+1 >= len(data) || data[i+1] != '[' {
		s.t.Fatalf("unexpected escape at %q", data[i:min(len(data), i+10)])
	}
	j := i + 2
	for j < len(data) && data[j] >= '0' && data[j] <= '9' {
		j++
	}
	if j >= len(data) {
		s.t.Fatalf("unterminated escape %q", data[i:])
	}
	n, _ := strconv.Atoi(data[i+2 : j])
	switch data[j] {
	case 'A':
		if n == 0 {
			n = 1
		}
		if n > s.row {
			s.t.Fatalf("cursor moved up %d lines from row %d: above what peal drew", n, s.row)
		}
		s.row -= n
	case 'J':
		s.lines = s.lines[:s.row+1]
		s.lines[s.row] = cut(s.lines[s.row], s.col)
	case 'K':
		if n == 2 {
			s.lines[s.row] = nil
		} else {
			s.lines[s.row] = cut(s.lines[s.row], s.col)
		}
	default:
		s.t.Fatalf("unexpected escape %q", data[i:j+1])
	}
	return j + 1
}

func cut(line []rune, col int) []rune {
	if len(line) > col {
		return line[:col]
	}
	return line
}

// text is what the screen shows, without trailing blank lines.
func (s *screen) text() []string {
	var out []string
	for _, l := range s.lines {
		out = append(out, strings.TrimRight(string(l), " "))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}
