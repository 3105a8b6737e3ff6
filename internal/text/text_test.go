package text

import (
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestClean(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"\x1b[31mred\x1b[0m":       "red",
		"\x1b]0;title\x07after":    "after",
		"a\tb\nc":                  "a\tb\nc",
		"bell\x07 and \x00nul\x7f": "bell and nul",
		"bad \xff byte":            "bad  byte",
		"plain":                    "plain",
	}
	for in, want := range cases {
		if got := Clean(in); got != want {
			t.Errorf("Clean(%q) = %q, want %q", in, got, want)
		}
	}
	if got := StripTerminalCodes("\x1b[1mbold\x1b[0m\x00"); got != "bold\x00" {
		t.Errorf("StripTerminalCodes kept or removed too much: %q", got)
	}
}

func TestQuoteAndSnippet(t *testing.T) {
	t.Parallel()
	if got := Quote("  a\n\tb   \x1b[2mc\x1b[0m  "); got != "a b c" {
		t.Errorf("Quote: %q", got)
	}
	long := strings.Repeat("é", maxLineLen+5)
	if got := Quote(long); got != strings.Repeat("é", maxLineLen)+"…" {
		t.Errorf("Quote of a long line: %d runes", len([]rune(got)))
	}
	if got := Snippet("one  two\nthree", 7); got != "one two…" {
		t.Errorf("Snippet: %q", got)
	}
	if got := Snippet("short", 7); got != "short" {
		t.Errorf("Snippet of a short text: %q", got)
	}
}

func TestMeaningful(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]bool{
		"error: no such file":    true,
		"   ---   ":              false,
		"":                       false,
		"Error: [object Object]": false,
		"42":                     true,
	} {
		if got := Meaningful(line); got != want {
			t.Errorf("Meaningful(%q) = %v", line, got)
		}
	}
	if got := LastMeaningful("first line\nlast   words\n---\n\n"); got != "last words" {
		t.Errorf("LastMeaningful: %q", got)
	}
	if got := LastMeaningful("--\n\n"); got != "" {
		t.Errorf("LastMeaningful of nothing meaningful: %q", got)
	}
}

func TestSecondsAndAttempts(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		600 * time.Second:       "600 s",
		0:                       "0 s",
		1500 * time.Millisecond: "1.5s",
	} {
		if got := Seconds(d); got != want {
			t.Errorf("Seconds(%v) = %q, want %q", d, got, want)
		}
	}
	if AttemptCount(1) != "1 attempt" || AttemptCount(3) != "3 attempts" {
		t.Errorf("AttemptCount: %q, %q", AttemptCount(1), AttemptCount(3))
	}
}

// TestWrap: lines of n columns at most, broken between words where a word
// fits, inside a word that does not; the lines after the first indented;
// nothing lost but the spaces at the breaks.
func TestWrap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s         string
		n, indent int
		want      []string
	}{
		{"short", 10, 2, []string{"short"}},
		{"exactly10!", 10, 2, []string{"exactly10!"}},
		{"one two three four", 10, 2, []string{"one two", "  three", "  four"}},
		{"abcdefghijklmnop", 10, 2, []string{"abcdefghij", "  klmnop"}},
		{"a abcdefghijklmnop", 10, 0, []string{"a", "abcdefghij", "klmnop"}},
		{"ünïcödé wörds hére", 8, 0, []string{"ünïcödé", "wörds", "hére"}},
		{"x y", 1, 4, []string{"x", "y"}},
	} {
		got := Wrap(tc.s, tc.n, tc.indent)
		if !slices.Equal(got, tc.want) {
			t.Errorf("Wrap(%q, %d, %d) = %q, want %q", tc.s, tc.n, tc.indent, got, tc.want)
		}
		for _, l := range got {
			if utf8.RuneCountInString(l) > tc.n {
				t.Errorf("Wrap(%q, %d): line %q too long", tc.s, tc.n, l)
			}
		}
	}
}

// TestCap: an output is cut on a character boundary, marked where it was
// cut, and its invalid bytes replaced.
func TestCap(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 2048) // two bytes each
	got := Cap(long, 2048)
	if !utf8.ValidString(got) || len(got) > 2048+len("…") || !strings.HasSuffix(got, "é…") {
		t.Fatalf("%d bytes, valid %v, ends %q", len(got), utf8.ValidString(got), got[len(got)-6:])
	}
	if got := Cap("ok\xff", 2048); got != "ok\uFFFD" {
		t.Fatalf("%q", got)
	}
	if got := Cap("a\nb", 3); got != "a\nb" {
		t.Fatalf("a short output changed: %q", got)
	}
}

// TestBytes: a size in the unit that suits it.
func TestBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 64 << 20: "64.0 MiB", 3 << 40: "3.0 TiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
