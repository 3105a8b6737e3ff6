package report

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"peal/internal/text"
)

// TextWidth is the most columns a line of Text takes: a report fits a
// terminal of 100 columns, whatever it holds.
const TextWidth = 100

// Text writes the report for a person at a terminal: what Markdown says,
// as plain text (no escapes, no table rules), the table's columns aligned.
// Text from the run (an error, an agent's output) has its control
// characters shown escaped, so that nothing it holds reaches the terminal
// as a command. No line is wider than TextWidth: a longer one goes on over
// the lines below it, and a table too wide for it wraps the text of its
// cells within narrower columns; nothing is cut.
func Text(w io.Writer, r Report) error {
	var b strings.Builder
	para := func(s string, indent int) {
		first := strings.Repeat(" ", indent)
		for _, l := range text.Wrap(first+plain(s), TextWidth, indent+2) {
			b.WriteString(l + "\n")
		}
	}
	para("peal run: "+runLine(r), 0)
	if line := totalsLine(r.Totals); line != "" {
		para(line, 0)
	}
	b.WriteString("\n")
	writeTable(&b, r.table())
	for _, sec := range r.sections() {
		b.WriteString("\n")
		switch {
		case sec.para != "":
			para(sec.para, 0)
		case sec.title != "":
			fmt.Fprintf(&b, "%s:\n", sec.title)
			for _, l := range sec.lines {
				para(l, 2)
			}
		default:
			for _, l := range sec.lines {
				para(l, 0)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// columnGap is the space between two columns of the table.
const columnGap = 2

// writeTable writes the task table, its columns aligned, no wider than
// TextWidth: the columns keep their widths when they fit; otherwise the
// widest are narrowed, first down to their longest word, then further,
// and each cell's text wraps within its column, a row taking as many
// lines as its tallest cell.
func writeTable(b *strings.Builder, tab taskTable) {
	cols := tab.columns()
	rows := make([][]string, 0, len(tab.Rows)+1)
	heads := make([]string, len(cols))
	for i, c := range cols {
		heads[i] = c.head
	}
	rows = append(rows, heads)
	for _, row := range tab.Rows {
		line := make([]string, len(cols))
		for i, c := range cols {
			line[i] = plain(c.cell(row))
		}
		rows = append(rows, line)
	}
	widths := fitColumns(rows, TextWidth)
	for _, row := range rows {
		wrapped := make([][]string, len(row))
		height := 1
		for i, cell := range row {
			wrapped[i] = text.Wrap(cell, widths[i], 0)
			height = max(height, len(wrapped[i]))
		}
		for n := range height {
			var l strings.Builder
			for i := range row {
				cell := ""
				if n < len(wrapped[i]) {
					cell = wrapped[i][n]
				}
				pad := strings.Repeat(" ", max(widths[i]-utf8.RuneCountInString(cell), 0))
				if i > 0 {
					l.WriteString(strings.Repeat(" ", columnGap))
				}
				if cols[i].right {
					l.WriteString(pad + cell)
				} else {
					l.WriteString(cell + pad)
				}
			}
			b.WriteString(strings.TrimRight(l.String(), " ") + "\n")
		}
	}
}

// fitColumns are the widths of the columns of rows (the heads first) that
// fit width, gaps included: each column's widest cell when they all fit;
// else the heads wider than their columns' cells wrap ("Review rounds"
// over two lines), then the widest columns are narrowed, one column at a
// time, no narrower than their longest word, then as far as they must (a
// word then breaks).
func fitColumns(rows [][]string, width int) []int {
	if len(rows) == 0 {
		return nil
	}
	n := len(rows[0])
	widths, body, words := make([]int, n), make([]int, n), make([]int, n)
	for r, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
			if r > 0 {
				body[i] = max(body[i], utf8.RuneCountInString(cell))
			}
			for _, w := range strings.Fields(cell) {
				words[i] = max(words[i], utf8.RuneCountInString(w))
				if r == 0 {
					body[i] = max(body[i], utf8.RuneCountInString(w))
				}
			}
		}
	}
	room := width - columnGap*(n-1)
	total := 0
	for _, w := range widths {
		total += w
	}
	// First the heads that are wider than their columns' cells wrap,
	// whole, the one that gives back most first: a head either fits on
	// its line or takes the width of its cells.
	for total > room {
		most := -1
		for i := range widths {
			if widths[i] > body[i] && (most < 0 || widths[i]-body[i] > widths[most]-body[most]) {
				most = i
			}
		}
		if most < 0 {
			break
		}
		total -= widths[most] - body[most]
		widths[most] = body[most]
	}
	for _, floor := range [][]int{words, nil} {
		for total > room {
			widest := -1
			for i, w := range widths {
				least := 1
				if floor != nil {
					least = floor[i]
				}
				if w > least && (widest < 0 || w > widths[widest]) {
					widest = i
				}
			}
			if widest < 0 {
				break
			}
			widths[widest]--
			total--
		}
	}
	return widths
}

// plain is s on one line for a terminal: line breaks and tabs become
// spaces, other control characters are shown escaped.
func plain(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteByte(' ')
		case unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
