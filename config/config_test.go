package config

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func writeTOML(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "peal.toml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLayerPrecedence proves flag > env > file > default for every pair.
func TestLayerPrecedence(t *testing.T) {
	t.Parallel()
	file := writeTOML(t, "phase_timeout_sec = 30\n")
	cases := []struct {
		name       string
		flag, env  string
		file       bool
		want       uint64
		wantSource Source
	}{
		{"flag over env", "10", "20", false, 10, SourceFlag},
		{"flag over file", "10", "", true, 10, SourceFlag},
		{"flag over default", "10", "", false, 10, SourceFlag},
		{"env over file", "", "20", true, 20, SourceEnv},
		{"env over default", "", "20", false, 20, SourceEnv},
		{"file over default", "", "", true, 30, SourceFile},
		{"default alone", "", "", false, 1800, SourceDefault},
		{"all layers", "10", "20", true, 10, SourceFlag},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := Inputs{Flags: map[string]any{}}
			if tc.flag != "" {
				in.Flags["phase_timeout_sec"] = tc.flag
			}
			if tc.env != "" {
				in.Env = []string{"PEAL_PHASE_TIMEOUT_SEC=" + tc.env}
			}
			if tc.file {
				in.ConfigPath = file
			}
			cfg, err := Load(in)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.PhaseTimeoutSec != tc.want || cfg.Sources["phase_timeout_sec"] != tc.wantSource {
				t.Fatalf("got %d from %s, want %d from %s", cfg.PhaseTimeoutSec, cfg.Sources["phase_timeout_sec"], tc.want, tc.wantSource)
			}
		})
	}
}

func TestEveryKeyFromEveryLayer(t *testing.T) {
	t.Parallel()
	// Each key set only by one layer reports that layer as its source.
	values := map[Kind][2]string{ // text form, TOML form
		KindString: {"x", `"x"`}, KindPath: {"p", `"p"`}, KindBool: {"true", "true"},
		KindU32: {"7", "7"}, KindU64: {"7", "7"}, KindSeconds: {"7", "7"}, KindF64: {"2.5", "2.5"}, KindLogLevel: {"peal=trace,warn", `"peal=trace,warn"`}, KindCommands: {"a b,c", `["a b", "c"]`},
		KindArgs: {"a,b", `["a", "b"]`}, KindSeverities: {"Minor", `["Minor"]`}, KindList: {"a,b", `["a", "b"]`}, KindPatterns: {"x|out_of_scope", `[{pattern = "x", reason = "out_of_scope"}]`},
		KindShell: {"go test ./...\nmake lint", `["go test ./...", "make lint"]`},
	}
	for _, k := range Keys {
		text, tomlText := values[k.Kind][0], values[k.Kind][1]
		if k.Kind == KindEnum {
			text, tomlText = k.Enum[len(k.Enum)-1], `"`+k.Enum[len(k.Enum)-1]+`"`
		}
		layers := map[Source]Inputs{
			SourceEnv:  {Env: []string{k.Env() + "=" + text}},
			SourceFile: {ConfigPath: writeTOML(t, k.Name+" = "+tomlText+"\n")},
		}
		if k.Flag != "" {
			layers[SourceFlag] = Inputs{Flags: map[string]any{k.Name: text}}
		}
		for src, in := range layers {
			cfg, err := Load(in)
			if err != nil {
				t.Fatalf("%s from %s: %v", k.Name, src, err)
			}
			if cfg.Sources[k.Name] != src {
				t.Errorf("%s: source %s, want %s", k.Name, cfg.Sources[k.Name], src)
			}
		}
	}
}

func TestListParsing(t *testing.T) {
	t.Parallel()
	cfg, err := Load(Inputs{Env: []string{
		"PEAL_STET_COMMANDS= stet run ,, other cmd ",
		"PEAL_STET_START_EXTRA_ARGS=--a, --b  --c",
		"PEAL_STET_DISMISS_PATTERNS=vendor/|out_of_scope,bad,x|not_a_reason,gen|false_positive",
		"PEAL_POST_RUN_COMMANDS=make lint, make test",
	}, Flags: map[string]any{"stet_run_extra_args": "--x,--y --z"}})
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, got, want []string) {
		t.Helper()
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	check("stet_commands", cfg.StetCommands, []string{"stet run", "other cmd"})
	check("stet_start_extra_args", cfg.StetStartExtraArgs, []string{"--a", "--b", "--c"})
	check("stet_run_extra_args", cfg.StetRunExtraArgs, []string{"--x", "--y", "--z"})
	check("post_run_commands", cfg.PostRunCommands, []string{"make lint", "make test"})
	want := []DismissPattern{{"vendor/", "out_of_scope"}, {"gen", "false_positive"}}
	if len(cfg.StetDismissPatterns) != 2 || cfg.StetDismissPatterns[0] != want[0] || cfg.StetDismissPatterns[1] != want[1] {
		t.Errorf("patterns = %v, want %v", cfg.StetDismissPatterns, want)
	}
}

// Shell commands keep their spaces and commas in every layer: a variable
// holds one per line, a TOML list one per entry; an empty entry is an error
// naming the key.
func TestShellCommandLists(t *testing.T) {
	t.Parallel()
	want := []string{"go test ./...", "cd web && npm test -- --run --reporter=dot,summary", "echo 'a, b'"}
	env := "PEAL_CHECK_COMMANDS=\n  go test ./... \r\n\ncd web && npm test -- --run --reporter=dot,summary\necho 'a, b'\n"
	cfg, err := Load(Inputs{Env: []string{env}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.CheckCommands, want) || cfg.Sources["check_commands"] != SourceEnv {
		t.Fatalf("from the variable: %q from %s, want %q", cfg.CheckCommands, cfg.Sources["check_commands"], want)
	}
	file := writeTOML(t, `check_commands = ["go test ./...", "cd web && npm test -- --run --reporter=dot,summary", "echo 'a, b'"]`+"\n")
	if cfg, err = Load(Inputs{ConfigPath: file}); err != nil || !slices.Equal(cfg.CheckCommands, want) {
		t.Fatalf("from the file: %q, %v", cfg.CheckCommands, err)
	}
	for _, body := range []string{`check_commands = ["go test ./...", ""]`, `check_commands = ["  "]`} {
		_, err := Load(Inputs{ConfigPath: writeTOML(t, body+"\n")})
		if err == nil || !strings.Contains(err.Error(), "key check_commands: entry") || !strings.Contains(err.Error(), "empty command") {
			t.Errorf("%s: err = %v, want an error naming the key and the empty entry", body, err)
		}
	}
	k, _ := KeyByName("check_commands")
	if _, err := k.ParseShellCommand(" \n "); err == nil || !strings.Contains(err.Error(), "empty command") {
		t.Errorf("an empty flag value: err = %v", err)
	}
	if got, err := k.ParseShellCommand("make lint"); err != nil || !slices.Equal(got, []string{"make lint"}) {
		t.Errorf("one flag value: %q, %v", got, err)
	}
}

func TestEmptyEnvIsUnset(t *testing.T) {
	t.Parallel()
	cfg, err := Load(Inputs{Env: []string{"PEAL_AGENT_CMD=", "PEAL_PHASE_TIMEOUT_SEC="}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AgentCmd != "agent" || cfg.Sources["agent_cmd"] != SourceDefault || cfg.PhaseTimeoutSec != 1800 {
		t.Fatalf("empty variables must count as unset: %q %d", cfg.AgentCmd, cfg.PhaseTimeoutSec)
	}
}

func TestParallelResolution(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   Inputs
		want bool
	}{
		{"default off", Inputs{}, false},
		{"max_parallel set turns it on", Inputs{Env: []string{"PEAL_MAX_PARALLEL=3"}}, true},
		{"explicit parallel=false wins", Inputs{Env: []string{"PEAL_MAX_PARALLEL=3", "PEAL_PARALLEL=false"}}, false},
		{"explicit parallel=true", Inputs{Flags: map[string]any{"parallel": "true"}}, true},
		{"max_parallel 0 forces off", Inputs{Flags: map[string]any{"parallel": "true", "max_parallel": "0"}}, false},
	}
	for _, tc := range cases {
		cfg, err := Load(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Parallel != tc.want {
			t.Errorf("%s: parallel = %v, want %v", tc.name, cfg.Parallel, tc.want)
		}
	}
}

func TestRunSummaryPathDefault(t *testing.T) {
	t.Parallel()
	cfg, err := Load(Inputs{Env: []string{"PEAL_STATE_DIR=/tmp/st"}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RunSummaryPath != "/tmp/st/run_summary.json" {
		t.Fatalf("run_summary_path = %q", cfg.RunSummaryPath)
	}
}

// TestBadInput checks that each class of bad configuration fails with one line
// naming what to fix.
func TestBadInput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		in    Inputs
		wants []string
	}{
		{"toml syntax", Inputs{ConfigPath: writeTOML(t, "model = \"x\"\nphase_timeout_sec = = 3\n")}, []string{"peal.toml", "line 2"}},
		{"unknown key", Inputs{ConfigPath: writeTOML(t, "modle = \"x\"\n")}, []string{`unknown key "modle"`}},
		{"unknown nested key", Inputs{ConfigPath: writeTOML(t, "[extra]\nx = 1\n")}, []string{`unknown key "extra"`}},
		{"wrong type", Inputs{ConfigPath: writeTOML(t, "phase_timeout_sec = \"ten\"\n")}, []string{"phase_timeout_sec", "wrong type string"}},
		{"negative number", Inputs{ConfigPath: writeTOML(t, "max_parallel = -1\n")}, []string{"max_parallel", "-1"}},
		{"list of non-strings", Inputs{ConfigPath: writeTOML(t, "post_run_commands = [1]\n")}, []string{"post_run_commands"}},
		{"bad dismiss reason", Inputs{ConfigPath: writeTOML(t, "stet_dismiss_patterns = [{pattern = \"x\", reason = \"meh\"}]\n")}, []string{"stet_dismiss_patterns", `"meh"`}},
		{"missing config file", Inputs{ConfigPath: "/nonexistent/peal.toml"}, []string{"/nonexistent/peal.toml", "no such file"}},
		{"env number", Inputs{Env: []string{"PEAL_PHASE_RETRY_COUNT=two"}}, []string{"PEAL_PHASE_RETRY_COUNT", `"two"`}},
		{"env u32 overflow", Inputs{Env: []string{"PEAL_MAX_PARALLEL=99999999999"}}, []string{"PEAL_MAX_PARALLEL"}},
		{"env bool", Inputs{Env: []string{"PEAL_PARALLEL=yes"}}, []string{"PEAL_PARALLEL", `"yes"`, "true or false"}},
		{"env enum", Inputs{Env: []string{"PEAL_ON_STET_FAIL=explode"}}, []string{"PEAL_ON_STET_FAIL", `"explode"`, "retry_once"}},
		{"flag enum", Inputs{Flags: map[string]any{"on_findings_remaining": "ignore"}}, []string{"--on-findings-remaining", `"ignore"`}},
		{"toml enum", Inputs{ConfigPath: writeTOML(t, "log_level = \"loud\"\n")}, []string{"log_level", `"loud"`}},
		{"flag number", Inputs{Flags: map[string]any{"phase_timeout_sec": "1.5"}}, []string{"--phase-timeout-sec", `"1.5"`}},
		{"PEAL_LOG", Inputs{Env: []string{"PEAL_LOG=loud"}}, []string{"PEAL_LOG", `"loud"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.in)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("message spans lines: %q", msg)
			}
			for _, w := range tc.wants {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not mention %q", msg, w)
				}
			}
		})
	}
}

func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestValidate(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	plan := filepath.Join(t.TempDir(), "plan.md")
	os.WriteFile(plan, []byte("## Task 1\nx\n"), 0o644)
	notGit := t.TempDir()
	bare := t.TempDir()
	for _, d := range []string{"objects", "refs"} {
		os.Mkdir(filepath.Join(bare, d), 0o755)
	}
	os.WriteFile(filepath.Join(bare, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	agent := filepath.Join(t.TempDir(), "agent")
	os.WriteFile(agent, []byte("#!/bin/sh\n"), 0o755)
	notExec := filepath.Join(t.TempDir(), "agent")
	os.WriteFile(notExec, []byte("x"), 0o644)

	base := func() []string {
		return []string{"PEAL_PLAN_PATH=" + plan, "PEAL_REPO_PATH=" + repo, "PEAL_AGENT_CMD=" + agent}
	}
	with := func(extra ...string) []string { return append(base(), extra...) }
	cases := []struct {
		name  string
		env   []string
		flags map[string]any
		wants []string
	}{
		{"ok", base(), nil, nil},
		{"missing plan", []string{"PEAL_REPO_PATH=" + repo}, nil, []string{"plan_path is not set", "--plan", "PEAL_PLAN_PATH"}},
		{"missing repo", []string{"PEAL_PLAN_PATH=" + plan}, nil, []string{"repo_path is not set", "--repo", "PEAL_REPO_PATH"}},
		{"plan missing", with("PEAL_PLAN_PATH=/nonexistent/plan.md"), nil, []string{"/nonexistent/plan.md", "does not exist", "PEAL_PLAN_PATH"}},
		{"plan is a folder", with("PEAL_PLAN_PATH=" + repo), nil, []string{"not a regular file"}},
		{"repo missing", with("PEAL_REPO_PATH=/nonexistent/repo"), nil, []string{"/nonexistent/repo", "does not exist"}},
		{"repo is a file", with("PEAL_REPO_PATH=" + plan), nil, []string{"not a folder"}},
		{"repo not git", with("PEAL_REPO_PATH=" + notGit), nil, []string{"not inside a git work tree"}},
		{"repo bare", with("PEAL_REPO_PATH=" + bare), nil, []string{"repo " + bare + " is a bare repository (git's data, without a work tree for the tasks to change): clone it (git clone " + bare + " FOLDER) and point PEAL_REPO_PATH at the clone"}},
		{"agent not on PATH", with("PEAL_AGENT_CMD=no-such-agent-cli"), nil, []string{`"no-such-agent-cli"`, "not on PATH", "PEAL_AGENT_CMD"}},
		{"agent not executable", with("PEAL_AGENT_CMD=" + notExec), nil, []string{"not an executable file"}},
		{"agent from flag", base(), map[string]any{"agent_cmd": "/nonexistent/agent"}, []string{"--agent-cmd"}},
		{"zero timeout", with("PEAL_PHASE_TIMEOUT_SEC=0"), nil, []string{"phase_timeout_sec must be at least 1"}},
		{"confine path with ..", with("PEAL_CONFINE_WRITE_PATHS=/work/../etc"), nil, []string{`confine_write_paths "/work/../etc"`, "PEAL_CONFINE_WRITE_PATHS", `holds ".."`}},
		{"confine path not full", with("PEAL_CONFINE_READ_DENY=secrets/key"), nil, []string{`confine_read_deny "secrets/key"`, "not a full path"}},
		{"confine env pattern", with("PEAL_CONFINE_ENV_PASS=A*B"), nil, []string{`confine_env_pass "A*B"`, "a prefix ending in *"}},
		{"confine host", with("PEAL_CONFINE_NETWORK_ALLOW=http://example.com/x"), nil, []string{"confine_network_allow", "PEAL_CONFINE_NETWORK_ALLOW", "host:port"}},
		{"stet_path missing", base(), map[string]any{"stet_path": "/nonexistent/stet"},
			[]string{"stet_path /nonexistent/stet does not exist (set by --stet-path): point it at the stet program, or unset it to use stet on PATH"}},
		{"stet_path not executable", with("PEAL_STET_PATH=" + notExec), nil, []string{"stet_path " + notExec + " is not an executable file (set by PEAL_STET_PATH)"}},
		{"agent_log_dir in a missing folder", with("PEAL_AGENT_LOG_DIR=/nonexistent/logs"), nil,
			[]string{"agent_log_dir /nonexistent/logs: the folder that would hold it, /nonexistent, does not exist (set by PEAL_AGENT_LOG_DIR): create it, or correct the path"}},
		{"log_file in a missing folder", with("PEAL_LOG_FILE=/nonexistent/peal.log"), nil, []string{"log_file /nonexistent/peal.log", "does not exist"}},
		{"run_summary_path in a missing folder", with("PEAL_RUN_SUMMARY_PATH=/nonexistent/s.json"), nil, []string{"run_summary_path /nonexistent/s.json", "does not exist"}},
		{"knowledge_dir in a missing folder", with("PEAL_KNOWLEDGE_DIR=/nonexistent/k"), nil, []string{"knowledge_dir /nonexistent/k", "does not exist"}},
		{"log_file in a file", with("PEAL_LOG_FILE=" + plan + "/peal.log"), nil, []string{"log_file " + plan + "/peal.log: " + plan + " is not a folder"}},
		{"outputs in a state folder peal makes", with("PEAL_STATE_DIR="+filepath.Join(notGit, "new", "state"), "PEAL_LOG_FILE="+filepath.Join(notGit, "new", "state", "logs", "peal.log"),
			"PEAL_AGENT_LOG_DIR="+filepath.Join(notGit, "new", "state", "agents")), nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load(Inputs{Env: tc.env, Flags: tc.flags})
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.Validate()
			if tc.wants == nil {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.AgentPath != agent {
					t.Fatalf("AgentPath = %q", cfg.AgentPath)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not mention %q", err, w)
				}
			}
		})
	}
}

func FuzzLoadFile(f *testing.F) {
	f.Add([]byte("phase_timeout_sec = 30\nmodel = \"m\"\n"))
	f.Add([]byte("stet_dismiss_patterns = [{pattern = \"x\", reason = \"out_of_scope\"}]\n"))
	f.Add([]byte("post_run_commands = [\"make\"]\nparallel = true\n"))
	f.Add([]byte("[escalation]\nenabled = true\n"))
	f.Add([]byte("= broken"))
	f.Add([]byte("log_level = \"peal=trace,warn\"\nkill_grace_sec = 9223372037\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		values, err := parseFile("fuzz.toml", data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error: %q", err)
			}
			return
		}
		for name, v := range values {
			k, ok := KeyByName(name)
			if !ok {
				t.Fatalf("accepted unknown key %q", name)
			}
			switch k.Kind {
			case KindU32, KindSeconds:
				if v.(uint64) > k.Max {
					t.Fatalf("%s out of range: %v", name, v)
				}
			case KindLogLevel:
				if !slices.Contains(LogLevels, v.(string)) {
					t.Fatalf("%s resolved to %v", name, v)
				}
			case KindEnum:
				found := false
				for _, e := range k.Enum {
					found = found || e == v
				}
				if !found {
					t.Fatalf("%s accepted %v", name, v)
				}
			}
		}
	})
}

var update = flag.Bool("update", false, "rewrite the key table of docs/configuration.md from the declarations")

// TestDocumented: the key table of docs/configuration.md is the declarations
// of Config, row by row, so the reference cannot fall behind the code. With
// -update the test writes the table.
func TestDocumented(t *testing.T) {
	t.Parallel()
	const path = "../docs/configuration.md"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "| key (TOML) |") }) + 2
	if start < 2 {
		t.Fatal("docs/configuration.md has no key table")
	}
	end := start
	for end < len(lines) && strings.HasPrefix(lines[end], "| `") {
		end++
	}
	var want []string
	for _, k := range Keys {
		want = append(want, docRow(k))
	}
	if *update {
		lines = slices.Concat(lines[:start], want, lines[end:])
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got := lines[start:end]
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			t.Errorf("docs/configuration.md lacks the row\n%s", want[i])
		case i >= len(want):
			t.Errorf("docs/configuration.md has a row for no key:\n%s", got[i])
		case got[i] != want[i]:
			t.Errorf("docs/configuration.md row\n%s\nwant\n%s", got[i], want[i])
		}
	}
}

// docRow is the row of a key in the table of docs/configuration.md.
func docRow(k Key) string {
	flag := "—"
	if k.Flag != "" {
		flag = "`" + k.FlagName() + "`"
	}
	def := "`" + tomlValue(k.Default) + "`"
	switch {
	case k.DefaultDoc != "":
		def = k.DefaultDoc
	case k.Default == nil:
		def = "unset"
	}
	help := k.Help
	if k.Required {
		help += " (required)"
	}
	cells := []string{"`" + k.Name + "`", "`" + k.Env() + "`", flag, k.TypeName(), def, help}
	for i, c := range cells {
		cells[i] = strings.ReplaceAll(c, "|", `\|`)
	}
	return "| " + strings.Join(cells, " | ") + " |"
}

// tomlValue writes a parsed value as TOML would.
func tomlValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case []string:
		quoted := make([]string, len(x))
		for i, s := range x {
			quoted[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(quoted, ", ") + "]"
	case []DismissPattern:
		return "[]"
	}
	return fmt.Sprint(v)
}

func writeSettings(t *testing.T, repo, body string) {
	t.Helper()
	p := filepath.Join(repo, tfSettingsPath)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTFSettingsLayer: a ticketflow project's settings sit below peal's file
// and above the defaults.
func TestTFSettingsLayer(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	writeSettings(t, repo, `{"workflow": {"failOn": ["critical"], "escalation": {"enabled": true, "maxRetries": 5,
		"models": {"fixer": "fix-model", "reviewerSecondOpinion": null, "worker": "work-model"}}}}`)
	cfg, err := Load(Inputs{Env: []string{"PEAL_REPO_PATH=" + repo}})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.EscalationEnabled || cfg.EscalationMaxRetries != 5 || cfg.EscalationFixer != "fix-model" || cfg.EscalationWorker != "work-model" {
		t.Fatalf("settings not applied: %+v", cfg)
	}
	if cfg.EscalationSecondOpinion != "" || cfg.Sources["escalation.reviewer_second_opinion"] != SourceDefault {
		t.Fatal("a null model must mean the base model")
	}
	if strings.Join(cfg.FailOn, ",") != "Critical" || cfg.Sources["fail_on"] != SourceTFSettings || cfg.Sources["escalation.enabled"] != SourceTFSettings {
		t.Fatalf("fail_on %v from %s", cfg.FailOn, cfg.Sources["fail_on"])
	}
	if got := Describe("escalation.worker", cfg.Sources); got != "escalation.worker from ticketflow's .tf/config/settings.json" {
		t.Fatalf("a model from the settings is described as %q", got)
	}

	file := writeTOML(t, "[escalation]\nmax_retries = 2\n")
	cfg, err = Load(Inputs{Env: []string{"PEAL_REPO_PATH=" + repo, "PEAL_ESCALATION_FIXER=env-model"}, ConfigPath: file})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.EscalationMaxRetries != 2 || cfg.Sources["escalation.max_retries"] != SourceFile {
		t.Fatal("peal's file must win over the ticketflow settings")
	}
	if cfg.EscalationFixer != "env-model" || cfg.Sources["escalation.fixer"] != SourceEnv {
		t.Fatal("the environment must win over the ticketflow settings")
	}
}

func TestTFSettingsInvalidIsAWarning(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"not json":    "{workflow",
		"wrong types": `{"workflow": {"escalation": {"enabled": "yes"}}}`,
		"bad failOn":  `{"workflow": {"failOn": ["Blocker"]}}`,
	} {
		repo := gitRepo(t)
		writeSettings(t, repo, body)
		cfg, err := Load(Inputs{Flags: map[string]any{"repo_path": repo}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], tfSettingsPath) {
			t.Fatalf("%s: warnings %q", name, cfg.Warnings)
		}
		if cfg.Sources["escalation.enabled"] != SourceDefault {
			t.Fatalf("%s: a broken settings file was applied", name)
		}
	}
}

func TestFailOn(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   Inputs
		want string
		err  string
	}{
		{Inputs{}, "Critical,Major", ""},
		{Inputs{Env: []string{"PEAL_FAIL_ON=critical, minor"}}, "Critical,Minor", ""},
		{Inputs{Flags: map[string]any{"fail_on": ""}}, "", ""},
		{Inputs{ConfigPath: writeTOML(t, "fail_on = []\n")}, "", ""},
		{Inputs{Env: []string{"PEAL_FAIL_ON="}}, "Critical,Major", ""},
		{Inputs{Env: []string{"PEAL_FAIL_ON=Blocker"}}, "", `PEAL_FAIL_ON: unknown severity "Blocker"`},
		{Inputs{ConfigPath: writeTOML(t, "fail_on = [\"Major\", \"Huge\"]\n")}, "", `unknown severity "Huge"`},
	}
	for _, tc := range cases {
		cfg, err := Load(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("err = %v, want %q", err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(cfg.FailOn, ",") != tc.want {
			t.Errorf("fail_on %v (err %v), want %q", cfg.FailOn, err, tc.want)
		}
	}
}

func TestTickets(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	planDir := t.TempDir()
	agent := filepath.Join(t.TempDir(), "agent")
	os.WriteFile(agent, []byte("#!/bin/sh\n"), 0o755)
	load := func(plan string, env ...string) (*Config, error) {
		p := filepath.Join(planDir, plan)
		os.WriteFile(p, []byte("## Task 1\n"), 0o644)
		cfg, err := Load(Inputs{Env: append([]string{"PEAL_PLAN_PATH=" + p, "PEAL_REPO_PATH=" + repo, "PEAL_AGENT_CMD=" + agent,
			"PEAL_STATE_DIR=" + filepath.Join(planDir, "st")}, env...)})
		if err != nil {
			t.Fatal(err)
		}
		return cfg, cfg.Validate()
	}
	for plan, name := range map[string]string{"plan.md": "plan", "My-Plan_2.md": "myplan", "123.md": "task", "ROADMAP": "roadmap"} {
		cfg, err := load(plan)
		if err != nil || cfg.TicketPrefix != DefaultTicketPrefix(cfg.PlanPath, cfg.RepoPath) || !strings.HasPrefix(cfg.TicketPrefix, name) {
			t.Errorf("%s: prefix %q (err %v), want %q and five letters", plan, cfg.TicketPrefix, err, name)
		}
	}
	cfg, err := load("plan.md")
	if err != nil || cfg.KnowledgeDir != filepath.Join(planDir, "st", "knowledge") {
		t.Fatalf("knowledge dir %q outside a ticketflow project (err %v)", cfg.KnowledgeDir, err)
	}
	os.MkdirAll(filepath.Join(repo, ".tf"), 0o755)
	if cfg, err = load("plan.md"); err != nil || cfg.KnowledgeDir != filepath.Join(repo, ".tf", "knowledge") {
		t.Fatalf("knowledge dir %q in a ticketflow project (err %v)", cfg.KnowledgeDir, err)
	}
	if _, err := load("plan.md", "PEAL_TICKET_ID=pt-te9b"); err != nil {
		t.Fatal(err)
	}
	for _, env := range []string{"PEAL_TICKET_ID=PT-1", "PEAL_TICKET_ID=pt_1", "PEAL_TICKET_ID=pt-", "PEAL_TICKET_PREFIX=my_plan"} {
		if _, err := load("plan.md", env); err == nil || !strings.Contains(err.Error(), strings.SplitN(env, "=", 2)[1]) {
			t.Errorf("%s: err = %v", env, err)
		}
	}
}

// A confinement path is full; ~ is the home folder; ".." is refused.
func TestConfinePaths(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"~/.cache/x": "/home/u/.cache/x", "~": "/home/u", "/opt/tools/": "/opt/tools", "/a//b": "/a/b"} {
		if got, err := fullPath(in, "/home/u"); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"rel/x", "~user/x", "/a/../b", "~/../x", ""} {
		if got, err := fullPath(bad, "/home/u"); err == nil {
			t.Errorf("%q accepted as %q", bad, got)
		}
	}
	if _, err := fullPath("~/x", ""); err == nil {
		t.Error("~ accepted without a home folder")
	}
}

// TestConfinePathsChecked: a path of confine_write_paths or
// confine_read_deny that does not exist, is a system folder, or would
// write (or hide) what the confinement keeps is refused when the
// configuration is read, in one line naming the key, the value and where
// it was set.
func TestConfinePathsChecked(t *testing.T) {
	t.Parallel()
	dir := testDir(t)
	repo := filepath.Join(dir, "repo")
	for _, d := range []string{filepath.Join(repo, ".git", "hooks"), filepath.Join(repo, "node_modules"), filepath.Join(dir, "st", "tmp"),
		filepath.Join(dir, "logs"), filepath.Join(dir, "k"), filepath.Join(dir, "cache")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(repo, ".git", "config"), nil, 0o644)
	os.WriteFile(filepath.Join(repo, "secret.env"), nil, 0o644)
	os.Symlink(repo, filepath.Join(dir, "to-repo"))
	plan := filepath.Join(dir, "plan.md")
	os.WriteFile(plan, []byte("## Task 1\nx\n"), 0o644)
	base := []string{"PEAL_PLAN_PATH=" + plan, "PEAL_REPO_PATH=" + repo, "PEAL_STATE_DIR=" + filepath.Join(dir, "st"),
		"PEAL_AGENT_LOG_DIR=" + filepath.Join(dir, "logs"), "PEAL_KNOWLEDGE_DIR=" + filepath.Join(dir, "k")}
	write := func(p string) string { return "PEAL_CONFINE_WRITE_PATHS=" + p }
	deny := func(p string) string { return "PEAL_CONFINE_READ_DENY=" + p }
	read := func(p string) string { return "PEAL_CONFINE_READ_PATHS=" + p }
	git, st := filepath.Join(repo, ".git"), filepath.Join(dir, "st")
	cases := []struct{ env, want string }{
		{write(repo), `confine_write_paths "` + repo + `" (set by PEAL_CONFINE_WRITE_PATHS) is or holds the repository's .git (` + git + `), which no confined call writes: name a folder beside it, or drop it`},
		{write(dir), `confine_write_paths "` + dir + `" (set by PEAL_CONFINE_WRITE_PATHS) is or holds the repository's .git (` + git + `)`},
		{write(git), `is or holds the repository's .git (` + git + `)`},
		{write(filepath.Join(git, "hooks")), `confine_write_paths "` + filepath.Join(git, "hooks") + `" (set by PEAL_CONFINE_WRITE_PATHS) lies in the repository's .git (` + git + `), which no confined call writes: drop it`},
		{write(filepath.Join(dir, "to-repo")), `is or holds the repository's .git (` + git + `)`},
		{write(st), `is or holds peal's state folder (` + st + `)`},
		{write(filepath.Join(st, "tmp")), `lies in peal's state folder (` + st + `)`},
		{write(filepath.Join(dir, "k")), `is or holds the retry-state store (knowledge_dir) (` + filepath.Join(dir, "k") + `)`},
		{write(filepath.Join(dir, "logs")), `is or holds agent_log_dir (` + filepath.Join(dir, "logs") + `)`},
		{write("/"), `confine_write_paths "/" (set by PEAL_CONFINE_WRITE_PATHS) is /, a system folder: every call could change it; name the folders the calls need, or drop it`},
		{write("/usr"), `confine_write_paths "/usr" (set by PEAL_CONFINE_WRITE_PATHS) is /usr, a system folder`},
		{write(filepath.Join(dir, "missing")), `confine_write_paths "` + filepath.Join(dir, "missing") + `" (set by PEAL_CONFINE_WRITE_PATHS) does not exist: create it, or drop it`},
		{write(filepath.Join(repo, "node_modules")), ""},
		{write(filepath.Join(dir, "cache")), ""},
		{deny(repo), `confine_read_deny "` + repo + `" (set by PEAL_CONFINE_READ_DENY) is or holds the main work tree (` + repo + `), which confined calls read: name what to hide inside it, or drop it`},
		{deny(st), `is or holds peal's state folder (` + st + `)`},
		{deny("/"), `confine_read_deny "/" (set by PEAL_CONFINE_READ_DENY) is /, a system folder every program reads: name what to hide inside it, or drop it`},
		{deny("/etc"), `is /etc, a system folder every program reads`},
		{deny(filepath.Join(dir, "missing")), `confine_read_deny "` + filepath.Join(dir, "missing") + `" (set by PEAL_CONFINE_READ_DENY) does not exist: create it, or drop it`},
		{read(filepath.Join(dir, "cache")), ""},
		{read(repo), ""},
		{read("/"), `confine_read_paths "/" (set by PEAL_CONFINE_READ_PATHS) is /, a system folder: name the folders in it the calls need, or drop it`},
		{read("/home"), `confine_read_paths "/home" (set by PEAL_CONFINE_READ_PATHS) is /home, a system folder`},
		{read(filepath.Join(dir, "missing")), `confine_read_paths "` + filepath.Join(dir, "missing") + `" (set by PEAL_CONFINE_READ_PATHS) does not exist: create it, or drop it`},
		{deny(filepath.Join(git, "config")), ""},
		{deny(filepath.Join(repo, "secret.env")), ""},
		{deny(filepath.Join(dir, "logs")), ""},
	}
	for _, tc := range cases {
		cfg, err := Load(Inputs{Env: append(slices.Clone(base), tc.env)})
		if err != nil {
			t.Fatal(err)
		}
		check := cfg.CheckConfinePaths()
		err = cfg.ValidateWithoutAgent()
		switch {
		case tc.want == "" && (err != nil || check != nil):
			t.Errorf("%s: %v (CheckConfinePaths: %v)", tc.env, err, check)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.env, err, tc.want)
		case tc.want != "" && (check == nil || check.Error() != err.Error()):
			t.Errorf("%s: CheckConfinePaths %v, validation %v", tc.env, check, err)
		}
	}
}

// TestConfineReadPathInASecret: a path of confine_read_paths that is or
// lies in a secret (confine_read_deny here; the built-in ones alike) is
// refused when the configuration is read, naming the secret.
func TestConfineReadPathInASecret(t *testing.T) {
	t.Parallel()
	dir := testDir(t)
	os.MkdirAll(filepath.Join(dir, "repo"), 0o755)
	os.MkdirAll(filepath.Join(dir, "vault", "keys"), 0o755)
	os.WriteFile(filepath.Join(dir, "plan.md"), []byte("## Task 1\nx\n"), 0o644)
	cfg, err := Load(Inputs{Env: []string{"PEAL_PLAN_PATH=" + filepath.Join(dir, "plan.md"), "PEAL_REPO_PATH=" + filepath.Join(dir, "repo"),
		"PEAL_STATE_DIR=" + filepath.Join(dir, "st"), "PEAL_CONFINE_READ_DENY=" + filepath.Join(dir, "vault"),
		"PEAL_CONFINE_READ_PATHS=" + filepath.Join(dir, "vault", "keys")}})
	if err != nil {
		t.Fatal(err)
	}
	want := `confine_read_paths "` + filepath.Join(dir, "vault", "keys") + `" (set by PEAL_CONFINE_READ_PATHS) lies in ` + filepath.Join(dir, "vault") +
		` (confine_read_deny), which no confined call reads: drop it`
	if err := cfg.CheckConfinePaths(); err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// testDir is a temporary folder whose path leads through no link, so that
// the paths a message names are the ones the test gave.
func testDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
