package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"peal/config"
	"peal/internal/testkit/fakes"
	"peal/internal/testkit/testgit"
	"peal/tickets"
)

// noAgent is the sandbox's environment on a machine without the agent CLI:
// agent_cmd at its default and nothing on PATH.
func (s *sandbox) noAgent(extra ...string) []string {
	empty := filepath.Join(s.dir, "empty-path")
	os.MkdirAll(empty, 0o755)
	return append(without(s.env(), "PEAL_AGENT_CMD"), append([]string{"PATH=" + empty}, extra...)...)
}

// closedTicket records one closed attempt of ticket id in the store.
func closedTicket(t *testing.T, store, id string) {
	t.Helper()
	ts := tickets.NewStore(store)
	defer ts.Close()
	tk, err := ts.Open(id, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tk.Begin(time.Now(), nil)
	tk.Complete(time.Now(), tickets.AttemptClosed, nil)
	tk.Close()
}

// TestCommandsWithoutAgent: status, config, retry-state and the dry run work
// on a machine without the agent CLI; only a real run needs it.
func TestCommandsWithoutAgent(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, plan3)
	closedTicket(t, filepath.Join(s.stateDir, "knowledge"), s.ticket(1))
	env := s.noAgent()

	if r := s.peal(env, "status"); r.code != 0 || !strings.Contains(r.stdout, "pending") {
		t.Errorf("status: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := s.peal(env, "run", "--dry-run")
	if r.code != 0 || !strings.HasPrefix(r.stdout, `note: agent command "agent" not found (not on PATH)`) ||
		!strings.Contains(r.stdout, "plan     model (agent default), attempts 1: agent --print --plan --workspace "+s.workDir()) {
		t.Errorf("dry run: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := s.peal(env, "retry-state", "show", s.ticket(1)); r.code != 0 || !strings.Contains(r.stdout, "ticket "+s.ticket(1)+": status closed") {
		t.Errorf("retry-state show: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := s.peal(env, "retry-state", "reset", s.ticket(1)); r.code != 0 || !strings.Contains(r.stdout, "retry-state.json.bak.") {
		t.Errorf("retry-state reset: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = s.peal(env, "run")
	if r.code != 1 || !strings.HasPrefix(r.stderr, `peal: error: agent command "agent" not found`) || s.keys() != "" {
		t.Errorf("run: %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(s.stateDir, "state.json")); err == nil {
		t.Error("a run without the agent wrote the state")
	}

	// peal config prints with plan and repo unset, marking what a run needs.
	bare := without(without(env, "PEAL_PLAN_PATH"), "PEAL_REPO_PATH")
	r = s.peal(bare, "config")
	if r.code != 0 || !strings.Contains(r.stdout, "plan_path") || strings.Count(r.stdout, "<- required by peal run") != 2 {
		t.Errorf("config: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = s.peal(bare, "config", "--json")
	var doc map[string]struct {
		Value    any  `json:"value"`
		Required bool `json:"required"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != 0 {
		t.Fatalf("config --json: %d %v %s", r.code, err, r.stderr)
	}
	if p := doc["plan_path"]; p.Value != nil || !p.Required || doc["model"].Required {
		t.Errorf("config --json: plan_path %+v, model %+v", p, doc["model"])
	}
}

// TestRetryStateStore: show and reset find the store as a run does, from
// --state-dir, PEAL_STATE_DIR, the config file's state_dir or knowledge_dir,
// the repo's ticketflow folder, or the working folder's.
func TestRetryStateStore(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nA\n")
	// A run configured by a file records its ticket where show must look.
	os.WriteFile(filepath.Join(s.dir, "run.toml"), []byte("state_dir = \"from-file\"\n"), 0o644)
	if r := s.peal(without(s.env(), "PEAL_STATE_DIR"), "run", "--config", "run.toml"); r.code != 0 {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	os.WriteFile(filepath.Join(s.dir, "store.toml"), []byte("knowledge_dir = \"kd\"\n"), 0o644)
	closedTicket(t, filepath.Join(s.dir, "kd"), "kd-1")
	closedTicket(t, filepath.Join(s.dir, "flag-state", "knowledge"), "flag-1")
	closedTicket(t, filepath.Join(s.dir, "env-state", "knowledge"), "env-1")
	tfRepo := filepath.Join(s.dir, "tfrepo")
	os.MkdirAll(filepath.Join(tfRepo, ".tf"), 0o755)
	closedTicket(t, filepath.Join(tfRepo, ".tf", "knowledge"), "tf-1")

	base := without(without(without(s.env(), "PEAL_STATE_DIR"), "PEAL_REPO_PATH"), "PEAL_PLAN_PATH")
	cases := []struct {
		ticket string
		env    []string
		args   []string
	}{
		{s.ticket(1), base, []string{"--config", "run.toml"}},
		{"kd-1", base, []string{"--config", "store.toml"}},
		{"flag-1", base, []string{"--state-dir", "flag-state"}},
		{"env-1", slices.Concat(base, []string{"PEAL_STATE_DIR=env-state"}), nil},
		{"kd-1", slices.Concat(base, []string{"PEAL_KNOWLEDGE_DIR=kd"}), nil},
		{"tf-1", base, []string{"--repo", "tfrepo"}},
	}
	for _, tc := range cases {
		args := append([]string{"retry-state", "show", tc.ticket}, tc.args...)
		if r := s.peal(tc.env, args...); r.code != 0 || !strings.Contains(r.stdout, "ticket "+tc.ticket+": status closed") {
			t.Errorf("%v: %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	// Without any setting the default store is .peal/knowledge, unless the
	// working folder is a ticketflow project.
	if r := s.peal(base, "retry-state", "show", s.ticket(1)); r.code != 1 || !strings.Contains(r.stderr, filepath.Join(s.dir, ".peal", "knowledge")) {
		t.Errorf("default store: %d %s", r.code, r.stderr)
	}
	r := s.peal(base, "retry-state", "reset", s.ticket(1), "--config", "run.toml")
	if r.code != 0 || !strings.HasPrefix(strings.TrimSpace(r.stdout), filepath.Join(s.dir, "from-file", "knowledge", "tickets", s.ticket(1))) {
		t.Errorf("reset --config: %d %q %s", r.code, r.stdout, r.stderr)
	}
	os.MkdirAll(filepath.Join(s.dir, ".tf"), 0o755)
	closedTicket(t, filepath.Join(s.dir, ".tf", "knowledge"), "here-1")
	if r := s.peal(base, "retry-state", "show", "here-1"); r.code != 0 {
		t.Errorf("the working folder's store: %d %s", r.code, r.stderr)
	}
}

func TestDetectMissingFolder(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, plan3)
	missing := filepath.Join(s.dir, "no-such-ticket")
	if r := s.peal(nil, "retry-state", "detect", missing); r.code != 1 || !strings.Contains(r.stderr, missing) || !strings.Contains(r.stderr, "does not exist") {
		t.Fatalf("%d %q", r.code, r.stderr)
	}
	if r := s.peal(nil, "retry-state", "detect", s.plan); r.code != 1 || !strings.Contains(r.stderr, "not a folder") {
		t.Fatalf("a file: %d %q", r.code, r.stderr)
	}
	// fail_on comes from the layers as for a run.
	if r := s.peal([]string{"PEAL_FAIL_ON=Blocker"}, "retry-state", "detect", s.dir); r.code != 1 || !strings.Contains(r.stderr, "PEAL_FAIL_ON") {
		t.Fatalf("PEAL_FAIL_ON: %d %q", r.code, r.stderr)
	}
}

// TestTaskZero: task 0 is a task like any other.
func TestTaskZero(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 0\nZero\n## Task 1\nOne\n")
	r := s.peal(s.env(), "run", "--dry-run", "--task", "0")
	if r.code != 0 || !strings.Contains(r.stdout, "task 0: ticket "+s.ticket(0)) || strings.Contains(r.stdout, "task 1:") {
		t.Fatalf("dry run: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := s.peal(s.env(), "run", "--task", "0"); r.code != 0 {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	if got := s.completed(); len(got) != 1 || got[0] != 0 {
		t.Fatalf("completed %v", got)
	}
	r = s.peal(s.env(), "status", "--json", "--from-task", "0")
	if r.code != 0 || !strings.Contains(r.stdout, `"index": 0,
      "status": "completed"`) {
		t.Fatalf("status: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestOutputsOverStateRefused: a run summary or log file on the state file
// is refused before anything runs.
func TestOutputsOverStateRefused(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, plan3)
	for _, args := range [][]string{
		{"--run-summary-path", filepath.Join(s.stateDir, "state.json")},
		{"--log-file", filepath.Join(s.stateDir, "state.json")},
	} {
		r := s.peal(s.env(), append([]string{"run"}, args...)...)
		if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, args[0]) || !strings.Contains(r.stderr, "state file") {
			t.Errorf("%v: %d %q", args, r.code, r.stderr)
		}
		if s.keys() != "" {
			t.Fatal("the agent ran")
		}
	}
}

// TestLogLevelDirectives: Peal's directive form selects the level of peal's
// own records, in every layer.
func TestLogLevelDirectives(t *testing.T) {
	t.Parallel()
	cases := []struct {
		env         []string
		args        []string
		debug, info bool
	}{
		{[]string{"PEAL_LOG_LEVEL=peal=trace,warn"}, nil, true, true},
		{nil, []string{"--log-level", "hyper=debug,warn"}, false, false},
		{nil, []string{"--log-level", "TRACE"}, true, true},
		{[]string{"PEAL_LOG_LEVEL=debug"}, []string{"--log-level", "peal=info"}, false, true},
		// PEAL_LOG, Peal's own variable, outranks every layer, as it did there.
		{[]string{"PEAL_LOG=debug"}, []string{"--log-level", "warn"}, true, true},
		{[]string{"PEAL_LOG=peal=warn", "PEAL_LOG_LEVEL=debug"}, nil, false, false},
		{[]string{"PEAL_LOG="}, []string{"--log-level", "warn"}, false, false},
	}
	for _, tc := range cases {
		s := newSandbox(t, "## Task 1\nA\n")
		r := s.peal(s.env(tc.env...), append([]string{"run"}, tc.args...)...)
		if r.code != 0 {
			t.Fatalf("%v %v: %d %s", tc.env, tc.args, r.code, r.stderr)
		}
		if got := strings.Contains(r.stderr, "level=DEBUG"); got != tc.debug {
			t.Errorf("%v %v: debug lines %v, want %v:\n%s", tc.env, tc.args, got, tc.debug, r.stderr)
		}
		if got := strings.Contains(r.stderr, "level=INFO"); got != tc.info {
			t.Errorf("%v %v: info lines %v, want %v:\n%s", tc.env, tc.args, got, tc.info, r.stderr)
		}
	}
	// The file layer parses the same way.
	s := newSandbox(t, "## Task 1\nA\n")
	os.WriteFile(filepath.Join(s.dir, "peal.toml"), []byte("log_level = \"peal=trace,warn\"\n"), 0o644)
	if r := s.peal(s.env(), "config", "--config", "peal.toml"); r.code != 0 || !strings.Contains(r.stdout, `log_level`) ||
		!strings.Contains(r.stdout, `"debug"`) {
		t.Fatalf("config: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestDurationsRounded: the text log shows durations in seconds, rounded;
// the JSON log keeps them exact.
func TestDurationsRounded(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		941297198 * time.Nanosecond:                    "0.94 s",
		30 * time.Second:                               "30 s",
		61*time.Second + 500*time.Millisecond:          "61.50 s",
		time.Duration(config.MaxSeconds) * time.Second: "1000000000 s",
		0: "0 s",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("%v: %q, want %q", d, got, want)
		}
	}
	var text bytes.Buffer
	logFile := filepath.Join(t.TempDir(), "peal.jsonl")
	log, _, closeLog, err := newLoggers(&config.Config{LogLevel: "info", LogFormat: "auto", LogFile: logFile}, console{w: &text}, false)
	if err != nil {
		t.Fatal(err)
	}
	log.Warn("call failed, retrying", "delay", 941297198*time.Nanosecond, slog.Group("g", "took", 2*time.Second))
	closeLog()
	if !strings.Contains(text.String(), `delay="0.94 s"`) || !strings.Contains(text.String(), `g.took="2 s"`) {
		t.Fatalf("text log: %s", text.String())
	}
	data, _ := os.ReadFile(logFile)
	if !strings.Contains(string(data), `"delay":941297198`) {
		t.Fatalf("JSON log: %s", data)
	}
}

// A relative stet_path is relative to the working folder, as every path is,
// although stet runs in the repository.
func TestRelativeStetPath(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nA\n")
	stetDir := filepath.Join(s.dir, "stet")
	os.MkdirAll(filepath.Join(s.dir, "tools"), 0o755)
	os.MkdirAll(stetDir, 0o755)
	if err := os.Symlink(bins["fakestet"], filepath.Join(s.dir, "tools", "stet")); err != nil {
		t.Fatal(err)
	}
	s.git(append(s.env(), testgit.Env...), "commit", "-q", "--allow-empty", "-m", "root")
	r := s.peal(append(s.env("FAKE_STET_DIR="+stetDir, "PEAL_STET_PATH=tools/stet"), testgit.Env...), "run")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	calls, err := fakes.ReadStetCalls(stetDir)
	if err != nil || len(fakes.StetCmds(calls)) == 0 {
		t.Fatalf("stet was never run: %v %s", err, r.stderr)
	}
}

// The log file: a named pipe there is refused at once rather than waited on
// (peal would hang, deaf to SIGINT and SIGTERM), and a dry run writes no
// log file at all.
func TestLogFileSpecialAndDryRun(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, "## Task 1\nA\n")
	pipe := filepath.Join(s.dir, "log.fifo")
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Fatal(err)
	}
	r := s.peal(s.env("PEAL_LOG_FILE="+pipe), "run")
	if r.code != 1 || !strings.Contains(r.stderr, "log file "+pipe+" cannot be opened") || !strings.Contains(r.stderr, "named pipe") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	logFile := filepath.Join(s.dir, "logs", "peal.jsonl")
	os.Mkdir(filepath.Dir(logFile), 0o755)
	if r := s.peal(s.env("PEAL_LOG_FILE="+logFile), "run", "--dry-run"); r.code != 0 {
		t.Fatalf("dry run: exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(logFile); !os.IsNotExist(err) {
		t.Fatalf("the dry run created the log file: %v", err)
	}
}
