// Package unidiff reads the hunks of git's unified diffs: the review code
// asks which lines a change covers, and the fake stet reviews them.
package unidiff

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
)

// Hunk is one hunk of a unified diff: its file, the new-side line range and
// the text that identifies it (header and lines).
type Hunk struct {
	File       string
	Start, End int // new-side lines, inclusive; End < Start for a pure deletion
	Raw        string
	Added      map[int]string // new-side line number → added line
}

var header = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

// Parse reads the hunks of `git diff --no-color` output.
func Parse(diff []byte) []Hunk {
	var hunks []Hunk
	var file string
	var cur *Hunk
	line := 0
	for _, l := range strings.Split(string(diff), "\n") {
		switch {
		case strings.HasPrefix(l, "diff --git "):
			cur = nil
		case strings.HasPrefix(l, "+++ "):
			file = strings.TrimPrefix(strings.TrimPrefix(l, "+++ "), "b/")
		case strings.HasPrefix(l, "@@ "):
			m := header.FindStringSubmatch(l)
			if m == nil {
				cur = nil
				continue
			}
			c, _ := strconv.Atoi(m[3])
			d := 1
			if m[4] != "" {
				d, _ = strconv.Atoi(m[4])
			}
			hunks = append(hunks, Hunk{File: file, Start: c, End: c + d - 1, Raw: l, Added: map[int]string{}})
			cur = &hunks[len(hunks)-1]
			line = c
		case cur != nil && (strings.HasPrefix(l, "+") || strings.HasPrefix(l, " ") || strings.HasPrefix(l, "-") || l == ""):
			cur.Raw += "\n" + l
			switch {
			case strings.HasPrefix(l, "+"):
				cur.Added[line] = l[1:]
				line++
			case strings.HasPrefix(l, " "):
				line++
			}
		}
	}
	for i := range hunks {
		hunks[i].Raw = string(bytes.TrimRight([]byte(hunks[i].Raw), "\n"))
	}
	return hunks
}

// Covers reports whether new-side line lies in the hunk, context lines
// included.
func (h Hunk) Covers(line int) bool { return line >= h.Start && line <= h.End }
