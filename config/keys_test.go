package config

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"peal/agent"
)

// TestSecondsKeys: every *_sec key is a seconds key, bounded by MaxSeconds,
// and MaxSeconds leaves room for the arithmetic done on durations (a delay
// doubled, a timeout plus the kill grace) without overflowing.
func TestSecondsKeys(t *testing.T) {
	t.Parallel()
	n := 0
	for _, k := range Keys {
		if strings.HasSuffix(k.Name, "_sec") {
			n++
			if k.Kind != KindSeconds || k.Max != MaxSeconds {
				t.Errorf("%s: kind %v, max %d; want a seconds key up to %d", k.Name, k.Kind, k.Max, MaxSeconds)
			}
		}
	}
	if n < 7 {
		t.Fatalf("only %d *_sec keys", n)
	}
	if d := time.Duration(MaxSeconds) * time.Second; d <= 0 || d > math.MaxInt64/4 {
		t.Fatalf("MaxSeconds is %v: no headroom", d)
	}
}

// TestNumbersBounded: a *_sec value that would overflow a duration, and any
// number beyond its key's type, is one line naming the flag, variable or key
// and the largest value accepted, in every layer; the largest value itself is
// accepted.
func TestNumbersBounded(t *testing.T) {
	t.Parallel()
	for _, k := range Keys {
		if k.Kind != KindSeconds && k.Kind != KindU32 {
			continue
		}
		max := strconv.FormatUint(k.Max, 10)
		over := strconv.FormatUint(k.Max+1, 10)
		layers := map[string]Inputs{
			k.Env(): {Env: []string{k.Env() + "=" + over}},
			k.Name:  {ConfigPath: writeTOML(t, tomlLine(k.Name, over))},
		}
		if k.Flag != "" {
			layers[k.FlagName()] = Inputs{Flags: map[string]any{k.Name: over}}
		}
		if k.Kind == KindSeconds {
			layers[k.Env()+" (wraps a duration)"] = Inputs{Env: []string{k.Env() + "=9223372037"}}
		}
		for where, in := range layers {
			_, err := Load(in)
			if err == nil {
				t.Errorf("%s: %s accepted", where, over)
				continue
			}
			msg := err.Error()
			if !strings.Contains(msg, strings.Fields(where)[0]) || !strings.Contains(msg, "the largest accepted is "+max) || strings.Contains(msg, "\n") {
				t.Errorf("%s: message %q does not name it and %s", where, msg, max)
			}
		}
		cfg, err := Load(Inputs{Env: []string{k.Env() + "=" + max}})
		if err != nil || cfg.Value(k.Name) != k.Max {
			t.Errorf("%s=%s: %v, err %v", k.Env(), max, cfg.Value(k.Name), err)
		}
	}
}

// tomlLine is `name = value` in TOML, in its table for a dotted key.
func tomlLine(name, value string) string {
	if table, key, ok := strings.Cut(name, "."); ok {
		return "[" + table + "]\n" + key + " = " + value + "\n"
	}
	return name + " = " + value + "\n"
}

func TestParseLogLevel(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"debug": "debug", "info": "info", "warn": "warn", "error": "error", "off": "off",
		"TRACE": "debug", "Warn": "warn", "3": "info", "5": "debug", "0": "off",
		"peal=trace,warn":               "debug",
		"warn,peal=error":               "error",
		"peal::runner=info,error":       "info",
		"peal=warn,peal::phase=debug":   "debug",
		"hyper=debug":                   "off",
		"hyper=debug,warn":              "warn",
		"peal":                          "debug",
		" peal = info , ":               "info",
		"peal[run{task=1}]=debug,error": "debug",
		"info,warn":                     "warn",
	}
	for text, want := range cases {
		if got, err := parseLogLevel(text); err != nil || got != want {
			t.Errorf("%q: %q (err %v), want %q", text, got, err, want)
		}
	}
	for _, bad := range []string{"", ",,", "loud", "peal=loud", "=debug", "hyper", "peal=trace,verbose"} {
		if got, err := parseLogLevel(bad); err == nil {
			t.Errorf("%q accepted as %q", bad, got)
		}
	}
}

// TestSameValueInEveryLayer: a text means the same whether a flag, a variable
// or the file gives it, and a flag may also hand over the value its parser
// made; a bad text is refused in every layer with the same reason.
func TestSameValueInEveryLayer(t *testing.T) {
	t.Parallel()
	texts := map[string][2]string{ // key: good text, bad text
		"phase_timeout_sec":             {"600", "10m"},
		"max_parallel":                  {"7", "-1"},
		"parallel":                      {"false", "yes"},
		"on_findings_remaining":         {"defer", "ignore"},
		"log_level":                     {"peal=trace,warn", "chatty"},
		"fail_on":                       {"minor, critical", "Blocker"},
		"stet_run_extra_args":           {"--a,--b --c", ""},
		"post_run_commands":             {"make lint, make test", ""},
		"max_consecutive_task_failures": {"2", "two"},
	}
	for name, tc := range texts {
		k, _ := KeyByName(name)
		parsed, err := k.ParseText(tc[0])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if reflect.TypeOf(parsed) != k.GoType {
			t.Fatalf("%s: ParseText gave a %T, want a %s", name, parsed, k.GoType)
		}
		var values []any
		for _, in := range []Inputs{
			{Flags: map[string]any{name: tc[0]}},
			{Flags: map[string]any{name: parsed}},
			{Env: []string{k.Env() + "=" + tc[0]}},
		} {
			cfg, err := Load(in)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			values = append(values, cfg.Value(name))
		}
		if !reflect.DeepEqual(values[0], values[1]) || !reflect.DeepEqual(values[0], values[2]) {
			t.Errorf("%s: flag text %v, flag value %v, variable %v", name, values[0], values[1], values[2])
		}
		if tc[1] == "" {
			continue
		}
		_, flagErr := Load(Inputs{Flags: map[string]any{name: tc[1]}})
		_, envErr := Load(Inputs{Env: []string{k.Env() + "=" + tc[1]}})
		if flagErr == nil || envErr == nil {
			t.Fatalf("%s: %q accepted (flag %v, variable %v)", name, tc[1], flagErr, envErr)
		}
		if flagErr.Error() != k.FlagName()+": "+strings.TrimPrefix(envErr.Error(), k.Env()+": ") {
			t.Errorf("%s: flag says %q, variable %q", name, flagErr, envErr)
		}
	}
	if _, err := Load(Inputs{Flags: map[string]any{"max_parallel": 3}}); err == nil || !strings.Contains(err.Error(), "internal error") {
		t.Fatalf("a value of another type was taken: %v", err)
	}
}

// TestAgentKindEnum: the kinds the configuration accepts are the kinds the
// agent package registers, and agent_kind's default is the agent package's.
func TestAgentKindEnum(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"agent_kind", "fallback_agent_kind"} {
		k, _ := KeyByName(name)
		if !slices.Equal(k.Enum, agent.Names()) {
			t.Errorf("%s accepts %v, the agent kinds are %v", name, k.Enum, agent.Names())
		}
	}
	if k, _ := KeyByName("agent_kind"); k.Default != agent.Default {
		t.Errorf("agent_kind defaults to %v, the agent package to %q", k.Default, agent.Default)
	}
}

// TestDeclarations: a field whose tags do not hold together is refused.
func TestDeclarations(t *testing.T) {
	t.Parallel()
	field := func(typ any, tag string) reflect.StructField {
		return reflect.StructField{Name: "X", Type: reflect.TypeOf(typ), Tag: reflect.StructTag(tag)}
	}
	bad := map[string]reflect.StructField{
		"unsupported type":       field(int8(1), `key:"x"`),
		"unknown kind":           field("", `key:"x" kind:"colour"`),
		"kind against type":      field("", `key:"x" kind:"seconds"`),
		"default does not parse": field(uint32(0), `key:"x" default:"many"`),
		"default beyond the max": field(uint64(0), `key:"x" kind:"seconds" default:"9223372037"`),
		"default not in enum":    field("", `key:"x" enum:"a,b" default:"c"`),
		"unknown enum list":      field("", `key:"x" enum:"@nowhere.Names"`),
		"default not a kind":     field("", `key:"x" enum:"@agent.Names" default:"qwerty"`),
	}
	for name, f := range bad {
		if _, err := keyOf(f, "x"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if k, err := keyOf(field(uint64(0), `key:"stall_sec"`), "stall_sec"); err != nil || k.Kind != KindSeconds || k.Max != MaxSeconds {
		t.Fatalf("a *_sec number: %+v (err %v)", k, err)
	}
	k, err := keyOf(field([]string(nil), `key:"a.b_c"`), "a.b_c")
	if err != nil || k.Flag != "a-b-c" || k.Env() != "PEAL_A_B_C" || k.Kind != KindList || !reflect.DeepEqual(k.Default, []string{}) {
		t.Fatalf("derived %+v (err %v)", k, err)
	}
}

// TestValidateWithoutAgent: commands that only read need no agent CLI; a run
// does.
func TestValidateWithoutAgent(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	plan := filepath.Join(t.TempDir(), "plan.md")
	os.WriteFile(plan, []byte("## Task 0\nx\n"), 0o644)
	cfg, err := Load(Inputs{Env: []string{"PEAL_PLAN_PATH=" + plan, "PEAL_REPO_PATH=" + repo, "PEAL_AGENT_CMD=no-such-agent-cli",
		"PEAL_FALLBACK_AGENT_CMD=no-such-fallback-cli"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.ValidateWithoutAgent(); err != nil {
		t.Fatalf("without the agent: %v", err)
	}
	if !filepath.IsAbs(cfg.KnowledgeDir) || !filepath.IsAbs(cfg.StateDir) {
		t.Fatalf("store %q, state dir %q not resolved", cfg.KnowledgeDir, cfg.StateDir)
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `"no-such-agent-cli"`) {
		t.Fatalf("run: %v", err)
	}
}

// TestOutputsKeepOffStateFiles: a run summary, log file or agent log folder
// that would overwrite the state file, its companions, the run record or the
// store is
// refused, naming the key; so are two outputs on one file.
func TestOutputsKeepOffStateFiles(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.md")
	os.WriteFile(plan, []byte("## Task 1\nx\n"), 0o644)
	stateDir := filepath.Join(dir, "st")
	os.MkdirAll(stateDir, 0o755)
	os.WriteFile(filepath.Join(stateDir, "state.json"), []byte("{}"), 0o644)
	link := filepath.Join(dir, "summary-link.json")
	if err := os.Symlink(filepath.Join(stateDir, "state.json"), link); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		env   []string
		wants []string // nil: accepted
	}{
		{[]string{"PEAL_RUN_SUMMARY_PATH=" + filepath.Join(stateDir, "state.json")}, []string{"run_summary_path", "PEAL_RUN_SUMMARY_PATH", "state file"}},
		{[]string{"PEAL_RUN_SUMMARY_PATH=st/state.json"}, []string{"run_summary_path", "state file"}},
		{[]string{"PEAL_RUN_SUMMARY_PATH=" + link}, []string{"run_summary_path", "state file"}},
		{[]string{"PEAL_LOG_FILE=" + filepath.Join(stateDir, "state.lock")}, []string{"log_file", "PEAL_LOG_FILE"}},
		{[]string{"PEAL_LOG_FILE=" + filepath.Join(stateDir, ".state.json.tmp-123")}, []string{"log_file"}},
		{[]string{"PEAL_LOG_FILE=" + filepath.Join(stateDir, "state.json.corrupt-20260101T000000Z")}, []string{"log_file"}},
		{[]string{"PEAL_AGENT_LOG_DIR=" + filepath.Join(stateDir, "knowledge", "tickets", "plan-1")}, []string{"agent_log_dir", "retry-state store"}},
		{[]string{"PEAL_LOG_FILE=" + filepath.Join(dir, "out.json"), "PEAL_RUN_SUMMARY_PATH=" + filepath.Join(dir, "out.json")}, []string{"run_summary_path and log_file"}},
		{[]string{"PEAL_RUN_SUMMARY_PATH=" + plan}, []string{"run_summary_path", "the plan"}},
		{[]string{"PEAL_LOG_FILE=" + filepath.Join(stateDir, "review", "task.json")}, []string{"log_file", "review or temporary files"}},
		{[]string{"PEAL_AGENT_LOG_DIR=" + filepath.Join(stateDir, "tmp")}, []string{"agent_log_dir", "review or temporary files"}},
		{[]string{"PEAL_LOG_FILE=" + filepath.Join(stateDir, "run_record.jsonl")}, []string{"log_file", "run record"}},
		{[]string{"PEAL_RUN_SUMMARY_PATH=" + filepath.Join(stateDir, "run_record.prev.jsonl")}, []string{"run_summary_path", "run record"}},
		{[]string{"PEAL_LOG_FILE=" + filepath.Join(stateDir, "peal.log"), "PEAL_AGENT_LOG_DIR=" + stateDir}, nil},
		{nil, nil}, // the default summary lives in the state folder
	}
	for _, tc := range cases {
		env := append([]string{"PEAL_PLAN_PATH=" + plan, "PEAL_REPO_PATH=" + repo, "PEAL_STATE_DIR=" + stateDir}, tc.env...)
		cfg, err := loadIn(dir, env)
		if err != nil {
			t.Fatal(err)
		}
		err = cfg.ValidateWithoutAgent()
		if tc.wants == nil {
			if err != nil {
				t.Errorf("%v: %v", tc.env, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%v: accepted", tc.env)
			continue
		}
		for _, w := range tc.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q does not mention %q", tc.env, err, w)
			}
		}
	}
}

// loadIn loads env with relative paths taken from dir (tests cannot change
// the working folder: they run in parallel).
func loadIn(dir string, env []string) (*Config, error) {
	env = slices.Clone(env)
	for i, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if strings.HasSuffix(name, "_PATH") || strings.HasSuffix(name, "_FILE") || strings.HasSuffix(name, "_DIR") {
			if value != "" && !filepath.IsAbs(value) {
				env[i] = name + "=" + filepath.Join(dir, value)
			}
		}
	}
	return Load(Inputs{Env: env})
}

// TestStoreDefaultRepo: the retry-state commands take the working folder for
// an unset repo_path: its ticketflow settings and store apply.
func TestStoreDefaultRepo(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	writeSettings(t, repo, `{"workflow": {"escalation": {"maxRetries": 6}}}`)
	cfg, err := Load(Inputs{DefaultRepo: repo})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.EscalationMaxRetries != 6 || cfg.Sources["repo_path"] != SourceDefault {
		t.Fatalf("max_retries %d, repo from %s", cfg.EscalationMaxRetries, cfg.Sources["repo_path"])
	}
	if err := cfg.ResolveStore(); err != nil || cfg.KnowledgeDir != filepath.Join(repo, ".tf", "knowledge") {
		t.Fatalf("store %q (err %v)", cfg.KnowledgeDir, err)
	}
	other := gitRepo(t)
	cfg, err = Load(Inputs{DefaultRepo: repo, Env: []string{"PEAL_REPO_PATH=" + other, "PEAL_STATE_DIR=" + filepath.Join(other, "st")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.ResolveStore(); err != nil || cfg.EscalationMaxRetries != 3 || cfg.KnowledgeDir != filepath.Join(other, "st", "knowledge") {
		t.Fatalf("a set repo_path must win: store %q, max_retries %d (err %v)", cfg.KnowledgeDir, cfg.EscalationMaxRetries, err)
	}
}

func TestQuoteBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 1<<20) + "\x1b]0;title\x07"
	_, err := Load(Inputs{Env: []string{"PEAL_ON_STET_FAIL=" + long}})
	if err == nil || len(err.Error()) > 300 || strings.ContainsAny(err.Error(), "\x1b\x07\n") {
		t.Fatalf("message of %d bytes: %.200q", len(err.Error()), err)
	}
	_, err = Load(Inputs{Env: []string{"PEAL_PARALLEL=\x1b[2J"}})
	if err == nil || strings.Contains(err.Error(), "\x1b") || !strings.Contains(err.Error(), `\x1b[2J`) {
		t.Fatalf("escape not shown quoted: %q", err)
	}
}

// TestOneNamePerSetting: a key's flag is its name written as a flag, or
// its first words (--plan for plan_path, --check-command once per item of
// check_commands), so that the flag, the key, its variable and every
// message name a setting with the same words; an old flag name is kept
// apart, hidden, and never a name of another key.
func TestOneNamePerSetting(t *testing.T) {
	t.Parallel()
	flags := map[string]string{}
	for _, k := range Keys {
		if k.Flag == "" {
			continue
		}
		dashed := strings.NewReplacer("_", "-", ".", "-").Replace(k.Name)
		if k.Flag != dashed && !strings.HasPrefix(dashed, k.Flag+"-") && dashed != k.Flag+"s" {
			t.Errorf("%s: flag --%s is not its name (--%s) nor its first words", k.Name, k.Flag, dashed)
		}
		for _, f := range []string{k.Flag, k.OldFlag} {
			if other, taken := flags[f]; f != "" && taken {
				t.Errorf("--%s names both %s and %s", f, other, k.Name)
			}
			flags[f] = k.Name
		}
	}
}
