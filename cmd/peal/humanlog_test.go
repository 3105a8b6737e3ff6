package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"peal/config"
	"peal/phase"
	"strings"
	"testing"
	"time"
)

// TestHumanLines: a record is one line for a person: the time, the level,
// the task and phase, the event, then its details; one longer than the
// width goes on over indented lines, broken between words where it can, so
// that nothing of it is lost; control characters are shown escaped; a
// call that belongs to no task names none.
func TestHumanLines(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	width := 80
	h := newHumanHandler(&out, slog.LevelInfo, func() int { return width })
	at := time.Date(2026, 1, 2, 14, 2, 7, 0, time.Local)
	log := func(h slog.Handler, level slog.Level, msg string, args ...any) {
		r := slog.NewRecord(at, level, msg, 0)
		r.Add(args...)
		if h.Enabled(context.Background(), level) {
			h.Handle(context.Background(), r)
		}
	}
	log(h, slog.LevelInfo, "starting call", "task", 2, "phase", "execute", "attempt", "attempt 1 of 3")
	log(h, slog.LevelWarn, "call failed, retrying", "delay", 1500*time.Millisecond)
	log(h, slog.LevelDebug, "hidden")
	log(h.WithAttrs([]slog.Attr{slog.Int("task", 3)}).WithGroup("g"), slog.LevelError, "refused\x1b[31m", "path", "/a\nb")
	log(h, slog.LevelInfo, "check passed", phase.TaskAttr(phase.NoTask), "stage", "start")
	log(h, slog.LevelInfo, "a long line", "argv", "[agent --print --workspace /work/repo/with/a/long/path --sandbox disabled --trust --force --model gpt-5]")
	log(h, slog.LevelInfo, "a long word", "argv", strings.Repeat("x", 100))
	width = 0 // unknown: 100 columns
	log(h, slog.LevelInfo, "a long word", "argv", strings.Repeat("x", 200))
	want := "14:02:07 INFO  task 2 execute: starting call  attempt=\"attempt 1 of 3\"\n" +
		"14:02:07 WARN  call failed, retrying  delay=\"1.50 s\"\n" +
		"14:02:07 ERROR task 3: refused\\x1b[31m  g.path=/a\\nb\n" +
		"14:02:07 INFO  check passed  stage=start\n" +
		// 79 columns of 80, the lines after it under the event.
		"14:02:07 INFO  a long line  argv=\"[agent --print --workspace\n" +
		"               /work/repo/with/a/long/path --sandbox disabled --trust --force\n" +
		"               --model gpt-5]\"\n" +
		// A word longer than a line starts a line of its own, broken
		// inside.
		"14:02:07 INFO  a long word\n" +
		"               argv=" + strings.Repeat("x", 79-20) + "\n" +
		"               " + strings.Repeat("x", 100-(79-20)) + "\n" +
		// Then 99 of an unknown width.
		"14:02:07 INFO  a long word\n" +
		"               argv=" + strings.Repeat("x", 99-20) + "\n" +
		"               " + strings.Repeat("x", 99-15) + "\n" +
		"               " + strings.Repeat("x", 200-(99-20)-(99-15)) + "\n"
	if out.String() != want {
		t.Fatalf("lines:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestLogFormats: log_format chooses the form of stderr's log; auto is the
// human form on a terminal only.
func TestLogFormats(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		format   string
		terminal bool
		prefix   string
	}{
		{"auto", false, "time="},
		{"auto", true, "14:"},
		{"human", false, "14:"},
		{"logfmt", true, "time="},
		{"json", true, "{"},
	} {
		var out bytes.Buffer
		h := console{w: &out, terminal: tc.terminal}.handler(config.LogFormat(tc.format), slog.LevelInfo)
		r := slog.NewRecord(time.Date(2026, 1, 2, 14, 2, 7, 0, time.Local), slog.LevelInfo, "task started", 0)
		r.Add("task", 1)
		h.Handle(context.Background(), r)
		if !strings.HasPrefix(out.String(), tc.prefix) {
			t.Errorf("%s on a terminal %v: %q", tc.format, tc.terminal, out.String())
		}
		if tc.format == "json" && !json.Valid(out.Bytes()) {
			t.Errorf("json: %q", out.String())
		}
	}
}

// TestJSONLogOnRequest: PEAL_LOG_FORMAT=json makes every line of a run's
// stderr log a JSON object, but the last line that ends the run.
func TestJSONLogOnRequest(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nA\n")
	r := s.peal(s.env("PEAL_LOG_FORMAT=json"), "run")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["msg"] == nil {
			t.Fatalf("not a JSON log line: %q", line)
		}
	}
}
