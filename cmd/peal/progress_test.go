package main

import (
	"bytes"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"peal/phase"
)

// TestProgressDisplay drives the display through the events of a parallel
// block, with a fixed clock, and checks what the terminal shows after each.
func TestProgressDisplay(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	now := time.Date(2026, 3, 15, 10, 0, 0, 0, time.UTC)
	width := 100
	p := newProgressAt(&out, func() int { return width }, func() time.Time { return now })
	s := newScreen(t)
	step := func(what string, want ...string) {
		t.Helper()
		s.feed(out.String())
		out.Reset()
		if got := s.text(); !slices.Equal(got, want) {
			t.Fatalf("after %s the screen shows\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	call := func(task int, phaseName phase.Name, n, of int, role phase.Role) phase.CallInfo {
		return phase.CallInfo{Phase: phaseName, Task: task, Attempt: phase.Attempt{N: n, Of: of, Role: role}, Started: now}
	}

	io.WriteString(p, "log one\n")
	step("a log line", "log one")
	p.PlanLoaded(3)
	end3 := p.CallStarted(call(3, "plan", 1, 1, phase.RolePrimary))
	step("a call started", "log one", "peal: task 3/3 | plan | attempt 1 of 1 | primary | 0s")
	end2 := p.CallStarted(call(2, "execute", 2, 3, phase.RoleFallback))
	step("a second call started", "log one",
		"peal: task 2/3 | execute | attempt 2 of 3 | fallback | 0s",
		"peal: task 3/3 | plan | attempt 1 of 1 | primary | 0s")
	now = now.Add(3 * time.Second)
	p.redraw()
	step("a tick", "log one",
		"peal: task 2/3 | execute | attempt 2 of 3 | fallback | 3s",
		"peal: task 3/3 | plan | attempt 1 of 1 | primary | 3s")
	io.WriteString(p, "log two\n")
	step("a log line under the status lines", "log one", "log two",
		"peal: task 2/3 | execute | attempt 2 of 3 | fallback | 3s",
		"peal: task 3/3 | plan | attempt 1 of 1 | primary | 3s")
	end3()
	step("a call ended", "log one", "log two", "peal: task 2/3 | execute | attempt 2 of 3 | fallback | 3s")
	endStet := p.CallStarted(phase.CallInfo{Phase: "stet", Task: phase.NoTask, Attempt: phase.Attempt{N: 1, Of: 1}, Started: now})
	step("a call of no task", "log one", "log two",
		"peal: stet | attempt 1 of 1 | 0s",
		"peal: task 2/3 | execute | attempt 2 of 3 | fallback | 3s")
	io.WriteString(p, "half a ")
	step("half a log line", "log one", "log two", "half a")
	io.WriteString(p, "line\n")
	step("the rest of it", "log one", "log two", "half a line",
		"peal: stet | attempt 1 of 1 | 0s",
		"peal: task 2/3 | execute | attempt 2 of 3 | fallback | 3s")
	width = 20
	p.redraw()
	step("the terminal narrowed", "log one", "log two", "half a line", "peal: stet | attemp", "peal: task 2/3 | ex")
	p.Close()
	step("close", "log one", "log two", "half a line")
	end2()
	endStet()
	io.WriteString(p, "after\n")
	step("calls ending after close", "log one", "log two", "half a line", "after")
}

// TestProgressOnlyOnTerminals: no display for a pipe, a file, /dev/null (a
// character device but no terminal) or a writer that is no file.
func TestProgressOnlyOnTerminals(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	file, err := os.Create(t.TempDir() + "/stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for name, out := range map[string]io.Writer{"pipe": w, "/dev/null": null, "file": file, "buffer": &bytes.Buffer{}} {
		if p := progressFor(out, []string{"TERM=xterm"}, false); p != nil {
			p.Close()
			t.Errorf("%s: progress display on a non-terminal", name)
		}
	}
}

// TestProgressLineDetail: a call's detail (the review's progress) shows next
// to its phase and follows what the call reports.
func TestProgressLineDetail(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 15, 10, 0, 0, 0, time.UTC)
	p := newProgressAt(io.Discard, func() int { return 100 }, func() time.Time { return now })
	p.PlanLoaded(2)
	detail := ""
	info := phase.CallInfo{Phase: "stet", Task: 1, Attempt: phase.Attempt{N: 1, Of: 1}, Started: now, Detail: func() string { return detail }}
	for _, tc := range []struct{ detail, want string }{
		{"", "peal: task 1/2 | stet | attempt 1 of 1 | 0s"},
		{"review: Reviewing hunk 2/7: a.go", "peal: task 1/2 | stet | review: Reviewing hunk 2/7: a.go | attempt 1 of 1 | 0s"},
	} {
		detail = tc.detail
		if got := p.line(info, now); got != tc.want {
			t.Errorf("line %q, want %q", got, tc.want)
		}
	}
}

// TestProgressAttemptCount: the status line counts attempts as the log does,
// the retry count's attempts first and the network retries apart, not as
// one total that the retries left would contradict.
func TestProgressAttemptCount(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 15, 10, 0, 0, 0, time.UTC)
	p := newProgressAt(io.Discard, func() int { return 100 }, func() time.Time { return now })
	p.PlanLoaded(1)
	info := phase.CallInfo{Phase: "execute", Task: 1, Attempt: phase.Attempt{N: 2, Of: 4, Allowed: 2, Network: 2, Role: phase.RolePrimary}, Started: now}
	want := "peal: task 1/1 | execute | attempt 2 of 2, +2 on network failures | primary | 0s"
	if got := p.line(info, now); got != want {
		t.Fatalf("status line %q, want %q", got, want)
	}
}
