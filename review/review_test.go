package review

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"peal/config"
	"peal/internal/gitrepo"
	"peal/internal/testkit/testgit"
	"peal/phase"
)

func TestCause(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, stderr, want string
	}{
		{"message, details and hint", "Could not resolve baseline ref \"nope\".\nDetails: Invalid ref or commit.: exit status 128: fatal: bad revision\nHint: If you used HEAD~N, the repo may be shallow; try the commit SHA (e.g. stet start <sha>).\n",
			`Could not resolve baseline ref "nope". (Invalid ref or commit.: exit status 128: fatal: bad revision)`},
		{"colours and a warning first", "\x1b[33mWarning: proceeding with uncommitted changes\x1b[0m\n\x1b[1;31mworking tree has uncommitted changes; commit or stash before starting\x1b[0m\nHint: Commit or stash your changes, then run 'stet start HEAD' again.\n",
			"working tree has uncommitted changes; commit or stash before starting"},
		{"unreachable", "OpenAI-compat server (e.g. LM Studio) unreachable at http://127.0.0.1:9/v1. Is the server running?\nDetails: openai models: connection refused\n",
			"OpenAI-compat server (e.g. LM Studio) unreachable at http://127.0.0.1:9/v1. Is the server running? (openai models: connection refused)"},
		{"progress first", "Worktree created at /s/worktrees/stet-abc\nReviewing hunk 1/2: a.go\nCould not run the review.\nDetails: 400 bad request\nHint: check the model\n",
			"Could not run the review. (400 bad request)"},
		{"details only", "Details: something\n", "something"},
		{"only a hint", "Hint: run stet doctor\n", ""},
		{"empty", "", ""},
		{"control characters", "bad\x07 thing\r\n", "bad thing"},
		{"long", strings.Repeat("é", 400), strings.Repeat("é", 300) + "…"},
	}
	for _, tc := range cases {
		if got := Cause(tc.stderr); got != tc.want {
			t.Errorf("%s: Cause = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestEventSink: progress events of `stet run --stream` feed the status
// line, whatever chunks they arrive in; finding events and other lines do
// not.
func TestEventSink(t *testing.T) {
	t.Parallel()
	e := &eventSink{log: slog.New(slog.DiscardHandler)}
	if got := e.detail(); got != "review" {
		t.Fatalf("before any event: %q", got)
	}
	stream := `{"type":"progress","msg":"2 hunks to review"}` + "\n" +
		`{"type":"progress","msg":"Reviewing hunk 1/2: a.go"}` + "\n" +
		`{"type":"finding","data":{"id":"x","message":"Reviewing hunk 9/9"}}` + "\n" +
		"not json\n" +
		`{"type":"progress","msg":"Reviewing hunk 2/2: \u001b[1mb.go\u001b[0m\u0007"}` + "\n" +
		`{"type":"done"}` + "\n"
	for i := 0; i < len(stream); i += 7 {
		e.Write([]byte(stream[i:min(i+7, len(stream))]))
	}
	if got := e.detail(); got != "review: Reviewing hunk 2/2: b.go" {
		t.Fatalf("detail %q", got)
	}
	if e.hunks() != 2 {
		t.Fatalf("hunks %d", e.hunks())
	}
	e.reset()
	if e.detail() != "review" || e.hunks() != 0 {
		t.Fatal("reset kept the last attempt's progress")
	}
}

// The record of an unfinished session resumes its review from the session's
// start only when every task of it runs again: when a task of it completed
// since, that task's committed work is not the others' to answer for.
func TestBaselineOfAnUnfinishedSession(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	git := func(args ...string) string { return testgit.Git(t, repo, args...) }
	testgit.Init(t, repo)
	git("commit", "-q", "--allow-empty", "-m", "before the block")
	start := git("rev-parse", "HEAD")
	git("commit", "-q", "--allow-empty", "-m", "the block's work")
	head := git("rev-parse", "HEAD")
	state := t.TempDir()
	caller := phase.Caller{Dir: repo, Env: testgit.Env, Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}}
	rv := &Reviewer{cfg: &config.Config{}, dir: filepath.Join(state, Folder), log: slog.New(slog.DiscardHandler),
		git: gitrepo.New(caller, slog.New(slog.DiscardHandler), time.Minute, repo, state)}
	for _, tc := range []struct {
		tasks []int
		want  string
	}{{[]int{2, 3}, start}, {[]int{3}, head}} {
		if err := rv.writeMarker(marker{Tasks: []int{2, 3}, Baseline: start}); err != nil {
			t.Fatal(err)
		}
		got, _, err := rv.baseline(context.Background(), tc.tasks)
		if err != nil || got != tc.want {
			t.Errorf("tasks %v: baseline %s, want %s (%v)", tc.tasks, got, tc.want, err)
		}
	}
}

// countingLock notes, at each Lock and Unlock, how many stet commands the
// script has recorded so far.
type countingLock struct {
	calls  string
	events []string
}

func (l *countingLock) note(what string) {
	data, _ := os.ReadFile(l.calls)
	l.events = append(l.events, fmt.Sprintf("%s@%d", what, strings.Count(string(data), "\n")))
}
func (l *countingLock) Lock()   { l.note("lock") }
func (l *countingLock) Unlock() { l.note("unlock") }

// TestStetWorktreeCommandsHoldTheLock: in a task's worktree, the stet
// commands that add or remove stet's own worktree (start, finish, and the
// clean-up: status and cleanup) each run holding the run's git lock, and a
// review does not take it.
func TestStetWorktreeCommandsHoldTheLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	script := filepath.Join(dir, "stet")
	// status exits 1: no session is open; a review finds nothing.
	os.WriteFile(script, []byte("#!/bin/sh\necho \"$1\" >> "+calls+"\n[ \"$1\" = status ] && exit 1\n[ \"$1\" = run ] && echo '{\"findings\":[]}'\nexit 0\n"), 0o755)
	lock := &countingLock{calls: calls}
	s := &stet{path: script, stateDir: filepath.Join(dir, "state"), worktrees: filepath.Join(dir, "worktrees"), attempts: 1,
		network: func() phase.Budget { return phase.Budget{} }, log: slog.New(slog.DiscardHandler), gitLock: lock,
		caller: phase.Caller{Dir: dir, Log: slog.New(slog.DiscardHandler), Limits: phase.Limits{Timeout: time.Minute, KillGrace: time.Second}}}
	ctx := context.Background()
	if err := s.start(ctx, 1, "abc", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.review(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s.finish(ctx, 1)
	os.MkdirAll(filepath.Join(s.worktrees, "stet-abc"), 0o755) // a worktree left behind
	s.clear(ctx, 1)
	data, _ := os.ReadFile(calls)
	if got := strings.Fields(string(data)); !slices.Equal(got, []string{"start", "run", "run", "finish", "status", "cleanup"}) {
		t.Fatalf("stet commands %q", got)
	}
	if want := []string{"lock@0", "unlock@1", "lock@3", "unlock@4", "lock@4", "unlock@6"}; !slices.Equal(lock.events, want) {
		t.Fatalf("lock events %q, want %q", lock.events, want)
	}
}

// TestFormatArgs: the options of stet run that choose its output format are
// told apart from the others, in each of their spellings.
func TestFormatArgs(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, kept, dropped []string }{
		{[]string{"--strictness", "strict", "--nitpicky"}, []string{"--strictness", "strict", "--nitpicky"}, nil},
		{[]string{"--stream", "--stream=false", "--json", "--json=true"}, nil, []string{"--stream", "--stream=false", "--json", "--json=true"}},
		{[]string{"--output", "human", "-q"}, []string{"-q"}, []string{"--output", "human"}},
		{[]string{"--output=human", "--trace", "--output"}, []string{"--trace"}, []string{"--output=human", "--output"}},
		{[]string{"--outputs", "--streaming"}, []string{"--outputs", "--streaming"}, nil},
	}
	for _, tc := range cases {
		kept, dropped := formatArgs(tc.in)
		if !slices.Equal(kept, tc.kept) || !slices.Equal(dropped, tc.dropped) {
			t.Errorf("%q: kept %q dropped %q, want %q and %q", tc.in, kept, dropped, tc.kept, tc.dropped)
		}
	}
}

func TestIsFindingsDocument(t *testing.T) {
	t.Parallel()
	for out, want := range map[string]bool{
		`{"findings":[]}` + "\n":    true,
		`{"findings":[{"id":"a"}]}`: true,
		`{"findings":null}`:         false,
		`{"issues":[]}`:             false,
		`[]`:                        false,
		"{\"type\":\"progress\"}\n{\"type\":\"done\"}": false,
		"0 finding(s).": false,
		"":              false,
		// Keys are read exactly, as ParseReview reads them.
		`{"Findings":[{"id":"F1"}]}`:                 false,
		`{"findings":[{"id":"F1"}],"FINDINGS":null}`: true,
		// An array of something else than findings is not stet's document.
		`{"findings":[1]}`:          false,
		`{"findings":[{"id":1}]}`:   false,
		`{"findings":[]}{"more":1}`: false,
	} {
		rv, got := findingsDocument(out)
		if got != want {
			t.Errorf("%q: %v, want %v", out, got, want)
		}
		if got && !reflect.DeepEqual(rv, ParseReview(out, 0)) {
			t.Errorf("%q: read as %+v, ParseReview reads %+v", out, rv, ParseReview(out, 0))
		}
	}
}
