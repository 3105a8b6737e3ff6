package report

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text writes the report for a person at a terminal: what Markdown says,
// as plain text (no escapes, no table rules), the table's columns aligned.
// Text from the run (an error, an agent's output) is kept to one line and
// its control characters are shown escaped, so that nothing it holds
// reaches the terminal as a command.
func Text(w io.Writer, r Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "peal run: %s\n", plain(runLine(r)))
	if line := totalsLine(r.Totals); line != "" {
		fmt.Fprintf(&b, "%s\n", plain(line))
	}
	b.WriteString("\n")
	tab := r.table()
	cols := tab.columns()
	cells := make([][]string, 0, len(tab.Rows)+1)
	heads := make([]string, len(cols))
	for i, c := range cols {
		heads[i] = c.head
	}
	cells = append(cells, heads)
	for _, row := range tab.Rows {
		line := make([]string, len(cols))
		for i, c := range cols {
			line[i] = plain(c.cell(row))
		}
		cells = append(cells, line)
	}
	widths := make([]int, len(cols))
	for _, line := range cells {
		for i, cell := range line {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	for _, line := range cells {
		var l strings.Builder
		for i, cell := range line {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell))
			if i > 0 {
				l.WriteString("  ")
			}
			if cols[i].right {
				l.WriteString(pad + cell)
			} else {
				l.WriteString(cell + pad)
			}
		}
		b.WriteString(strings.TrimRight(l.String(), " ") + "\n")
	}
	for _, sec := range r.sections() {
		b.WriteString("\n")
		switch {
		case sec.para != "":
			fmt.Fprintf(&b, "%s\n", plain(sec.para))
		case sec.title != "":
			fmt.Fprintf(&b, "%s:\n", sec.title)
			for _, l := range sec.lines {
				fmt.Fprintf(&b, "  %s\n", plain(l))
			}
		default:
			for _, l := range sec.lines {
				fmt.Fprintf(&b, "%s\n", plain(l))
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
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
