package main

import (
	"bytes"
	"context"
	"io"
	"reflect"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"peal/config"
)

// runMain runs Main in-process with an empty environment.
func runMain(args ...string) result {
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), args, nil, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// parseConfig parses `peal config ARGS` and resolves the configuration from
// the flags alone.
func parseConfig(args ...string) (*config.Config, error) {
	parser, err := newParser(io.Discard, io.Discard)
	if err != nil {
		return nil, err
	}
	kctx, err := parser.Parse(append([]string{"config"}, args...))
	if err != nil {
		return nil, err
	}
	flags, old := flagValues(kctx)
	return config.Load(config.Inputs{Flags: flags, OldFlags: old})
}

// TestOldFlagNames: a flag's old name still sets its key, with one warning
// naming the flag that replaced it; given both, the new name wins.
func TestOldFlagNames(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig("--stet-start-args", "--a --b", "--stet-start-args", "--c", "--max-retries", "5")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.StetStartExtraArgs, []string{"--c"}) || cfg.EscalationMaxRetries != 5 {
		t.Fatalf("start args %q, max retries %d", cfg.StetStartExtraArgs, cfg.EscalationMaxRetries)
	}
	want := []string{
		"--stet-start-args is the old name of --stet-start-extra-args (stet_start_extra_args, PEAL_STET_START_EXTRA_ARGS): it still works; use --stet-start-extra-args",
		"--max-retries is the old name of --escalation-max-retries (escalation.max_retries, PEAL_ESCALATION_MAX_RETRIES): it still works; use --escalation-max-retries",
	}
	if !slices.Equal(cfg.Warnings, want) {
		t.Fatalf("warnings %q, want %q", cfg.Warnings, want)
	}
	cfg, err = parseConfig("--stet-run-args", "--old", "--stet-run-extra-args", "--new")
	if err != nil || !slices.Equal(cfg.StetRunExtraArgs, []string{"--new"}) || len(cfg.Warnings) != 1 {
		t.Fatalf("both names: run args %q, warnings %q, %v", cfg.StetRunExtraArgs, cfg.Warnings, err)
	}
	if r := runMain("run", "--help"); r.code != 0 || strings.Contains(r.stdout, "--stet-start-args") || !strings.Contains(r.stdout, "--stet-start-extra-args") {
		t.Fatalf("help shows the old name, or not the new one:\n%s", r.stdout)
	}
}

// TestBoolFlagForms: every boolean flag stands alone, negated, or with an
// explicit value after = or as the next word, and a wrong value is refused
// naming the flag.
func TestBoolFlagForms(t *testing.T) {
	t.Parallel()
	forms := []struct {
		args func(flag string) []string
		want bool
	}{
		{func(f string) []string { return []string{"--" + f} }, true},
		{func(f string) []string { return []string{"--no-" + f} }, false},
		{func(f string) []string { return []string{"--" + f + "=true"} }, true},
		{func(f string) []string { return []string{"--" + f + "=false"} }, false},
		{func(f string) []string { return []string{"--" + f, "true"} }, true},
		{func(f string) []string { return []string{"--" + f, "false"} }, false},
		{func(f string) []string { return []string{"--" + f, "false", "--model", "m"} }, false},
	}
	n := 0
	for _, k := range config.Keys {
		if k.Kind != config.KindBool || k.Flag == "" {
			continue
		}
		n++
		for _, form := range forms {
			args := form.args(k.Flag)
			cfg, err := parseConfig(args...)
			if err != nil {
				t.Errorf("%v: %v", args, err)
				continue
			}
			if cfg.Value(k.Name) != form.want || cfg.Sources[k.Name] != config.SourceFlag {
				t.Errorf("%v: %v from %s, want %v from the flag", args, cfg.Value(k.Name), cfg.Sources[k.Name], form.want)
			}
		}
		for _, bad := range [][]string{{"--" + k.Flag, "yes"}, {"--" + k.Flag + "=1"}} {
			_, err := parseConfig(bad...)
			if err == nil || !strings.HasPrefix(err.Error(), k.FlagName()+": ") || !strings.Contains(err.Error(), "want true or false") {
				t.Errorf("%v: %v", bad, err)
			}
		}
	}
	if n < 7 {
		t.Fatalf("only %d boolean flags", n)
	}
	// As Peal was used: an explicit value on the triage switch.
	r := runMain("config", "--stet-disable-llm-triage", "true", "--parallel=true", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"stet_disable_llm_triage": {
    "value": true,
    "source": "flag"`) {
		t.Fatalf("%d %s %s", r.code, r.stdout, r.stderr)
	}
}

// TestFlagValuesParsedAtOnce: a flag's value is parsed when the command line
// is, by the parser of its key: the error names the flag and the reason.
func TestFlagValuesParsedAtOnce(t *testing.T) {
	t.Parallel()
	cases := map[string][]string{
		`--phase-timeout-sec: invalid value "9223372037": the largest accepted is 1000000000 seconds`: {"--phase-timeout-sec", "9223372037"},
		`--kill-grace-sec: invalid value "0x10": want a non-negative whole number`:                    {"--kill-grace-sec=0x10"},
		`--max-parallel: invalid value "lots"`:                                                        {"--max-parallel", "lots"},
		`--on-findings-remaining: invalid value "ignore": want one of fail, warn, defer`:              {"--on-findings-remaining", "ignore"},
		`--log-level: invalid log level "chatty"`:                                                     {"--log-level", "chatty"},
		`--fail-on: unknown severity "Blocker"`:                                                       {"--fail-on", "Blocker"},
		`--check-command: an empty command`:                                                           {"--check-command", "go test ./...", "--check-command", " "},
	}
	for want, args := range cases {
		r := runMain(append([]string{"config"}, args...)...)
		if r.code != 1 || !strings.HasPrefix(r.stderr, "peal: error: "+want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, %q; want one line starting %q", args, r.code, r.stderr, want)
		}
	}
	cfg, err := parseConfig("--log-level", "peal=trace,warn", "--stet-run-extra-args", "--a,--b --c", "--max-consecutive-task-failures", "0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LogLevel != "debug" || !slices.Equal(cfg.StetRunExtraArgs, []string{"--a", "--b", "--c"}) ||
		cfg.MaxConsecutiveTaskFailures == nil || *cfg.MaxConsecutiveTaskFailures != 0 {
		t.Fatalf("log level %q, run args %q, cap %v", cfg.LogLevel, cfg.StetRunExtraArgs, cfg.MaxConsecutiveTaskFailures)
	}
}

// TestRepeatedCheckCommand: each --check-command is one command, kept
// whole, spaces and commas included, in the order given.
func TestRepeatedCheckCommand(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig("--check-command", "go test ./...", "--check-command=cd web && npm test -- --run --reporter=dot,summary", "--check-command", "make lint")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"go test ./...", "cd web && npm test -- --run --reporter=dot,summary", "make lint"}
	if !slices.Equal(cfg.CheckCommands, want) || cfg.Sources["check_commands"] != config.SourceFlag {
		t.Fatalf("%q from %s, want %q from the flag", cfg.CheckCommands, cfg.Sources["check_commands"], want)
	}
}

// TestHelpPerCommand: each command's help lists the flags of the keys it
// reads and no other; the others are still accepted, so a run's command
// line works for status. Enumerations show their values.
func TestHelpPerCommand(t *testing.T) {
	t.Parallel()
	var all []string
	for _, k := range config.Keys {
		if k.Flag != "" {
			all = append(all, k.Name)
		}
	}
	cases := []struct {
		args []string
		keys []string
	}{
		{[]string{"run"}, all},
		{[]string{"config"}, all},
		{[]string{"status"}, statusKeys},
		{[]string{"report"}, reportKeys},
		{[]string{"retry-state", "show"}, showKeys},
		{[]string{"retry-state", "reset"}, storeKeys},
		{[]string{"retry-state", "detect"}, detectKeys},
	}
	for _, tc := range cases {
		for _, name := range tc.keys {
			if k, ok := config.KeyByName(name); !ok || k.Flag == "" {
				t.Errorf("%v reads %q, which is no key with a flag", tc.args, name)
			}
		}
		r := runMain(append(tc.args, "--help")...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d %s", tc.args, r.code, r.stderr)
		}
		for _, k := range config.Keys {
			if k.Flag == "" {
				continue
			}
			listed := regexp.MustCompile(`--(\[no-\])?` + regexp.QuoteMeta(k.Flag) + `(=|\s)`).MatchString(r.stdout)
			if want := slices.Contains(tc.keys, k.Name); listed != want {
				t.Errorf("%v help: %s listed %v, want %v", tc.args, k.FlagName(), listed, want)
			}
		}
	}
	if r := runMain("run", "--help"); !strings.Contains(r.stdout, "--on-findings-remaining=fail|warn|defer") ||
		!strings.Contains(r.stdout, "--on-stet-fail=fail|retry_once|skip") {
		t.Errorf("run help lacks the values of the enumerations:\n%s", r.stdout)
	}
	if r := runMain("status", "--help"); strings.Contains(r.stdout, "--dry-run") || strings.Contains(r.stdout, "--retry-reset") {
		t.Errorf("status help lists run-only flags:\n%s", r.stdout)
	}
	flat := func(args ...string) string { return strings.Join(strings.Fields(runMain(args...).stdout), " ") }
	if !strings.Contains(flat("run", "--help"), "Markdown plan to execute (required)") ||
		!strings.Contains(flat("retry-state", "reset", "--help"), "Git work tree the agent works in (unset: the working folder)") ||
		strings.Contains(flat("config", "--help"), "(required)") {
		t.Error("the notes of --plan and --repo do not fit the commands")
	}
	// A hidden flag is parsed like a shown one.
	if r := runMain("status", "--phase-timeout-sec", "lots"); r.code != 1 || !strings.Contains(r.stderr, "--phase-timeout-sec") {
		t.Errorf("status with a run flag: %d %s", r.code, r.stderr)
	}
}

func TestOneLine(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"plain":                       "plain",
		"two\nlines":                  `two\nlines`,
		"tab\there":                   "tab here",
		"title \x1b]0;owned\x07 done": `title \x1b]0;owned\x07 done`,
		"clear \x1b[2J \u009b":        `clear \x1b[2J \x9b`,
		"ünïcödé ✓":                   "ünïcödé ✓",
	}
	for in, want := range cases {
		if got := oneLine(in); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", in, got, want)
		}
	}
	long := oneLine(strings.Repeat("é", maxLine))
	if len(long) > maxLine+len("… (cut)") || !strings.HasSuffix(long, "… (cut)") || !strings.HasPrefix(long, "éé") {
		t.Fatalf("a long message: %d bytes, ends %q", len(long), long[len(long)-12:])
	}
}

// TestOnlyTheNamedCommandGetsFlags: a parser built for a command's
// arguments gives that command every flag the full parser gives it, and no
// other command any; arguments that name no command get them all.
func TestOnlyTheNamedCommandGetsFlags(t *testing.T) {
	t.Parallel()
	flagsOf := func(p *kong.Kong) map[string][]string {
		out := map[string][]string{}
		var walk func(n *kong.Node)
		walk = func(n *kong.Node) {
			for _, f := range n.Flags {
				out[n.Path()] = append(out[n.Path()], f.Name)
			}
			for _, c := range n.Children {
				walk(c)
			}
		}
		walk(p.Model.Node)
		return out
	}
	isKeyFlag := func(name string) bool {
		return slices.ContainsFunc(config.Keys, func(k config.Key) bool { return k.Flag != "" && k.Flag == name })
	}
	full, err := newParser(io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	all := flagsOf(full)
	for _, args := range [][]string{{"run"}, {"config"}, {"status"}, {"retry-state", "show"}, {"doctor"}, {"report"}} {
		p, err := newParser(io.Discard, io.Discard, args...)
		if err != nil {
			t.Fatal(err)
		}
		got := flagsOf(p)
		for path, want := range all {
			named := path == args[0] || strings.HasPrefix(path, args[0]+" ")
			switch {
			case named && !slices.Equal(got[path], want):
				t.Errorf("%v: %s has flags %v, want %v", args, path, got[path], want)
			case !named && slices.ContainsFunc(got[path], isKeyFlag):
				t.Errorf("%v: %s has flags %v, want none of the keys", args, path, got[path])
			}
		}
	}
	for _, args := range [][]string{nil, {"--help"}, {"bogus"}} {
		p, err := newParser(io.Discard, io.Discard, args...)
		if err != nil {
			t.Fatal(err)
		}
		if got := flagsOf(p); !reflect.DeepEqual(got, all) {
			t.Errorf("%v: flags differ from the full parser's", args)
		}
	}
}

// TestFlagSuggestions: an unknown flag names the flag meant, the key's own
// name written as a flag included, and a negative number names what the
// key wants instead of another form that is refused as well.
func TestFlagSuggestions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		line string
	}{
		{[]string{"run", "--plan-path", "p.md"}, `peal: error: unknown flag --plan-path, did you mean "--plan"?`},
		{[]string{"status", "--repo-path", "."}, `peal: error: unknown flag --repo-path, did you mean "--repo"?`},
		{[]string{"run", "--phase-timout-sec", "5"}, `peal: error: unknown flag --phase-timout-sec, did you mean "--phase-timeout-sec"?`},
		{[]string{"run", "--no-paralel"}, `peal: error: unknown flag --no-paralel, did you mean "--no-parallel"?`},
		{[]string{"run", "--stet-commands", "x"}, `peal: error: unknown flag --stet-commands: stet_commands has no flag; set PEAL_STET_COMMANDS or stet_commands in the config file`},
		{[]string{"run", "--phase-retry-count", "-1"}, `peal: error: --phase-retry-count: invalid value "-1": want a non-negative whole number`},
		{[]string{"run", "--max-cost-usd", "-0.5"}, `peal: error: --max-cost-usd: invalid value "-0.5": want a non-negative number such as 2.5`},
	} {
		r := runMain(tc.args...)
		if r.code != 1 || r.stderr != tc.line+"\n" {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, r.code, r.stderr, tc.line)
		}
	}
}

// TestVersion: --version tells the module's version and the commit from
// the build information.
func TestVersion(t *testing.T) {
	t.Parallel()
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "peal", Version: "v0.0.0-20261128034126-dd26f7c3af7a"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "dd26f7c3af7a4ff4d13f39ee4202e1cd0842e853"},
			{Key: "vcs.time", Value: "2026-11-28T03:41:26Z"}, {Key: "vcs.modified", Value: "true"}}}
	if got, want := versionOf(info), "peal v0.0.0-20261128034126-dd26f7c3af7a, commit dd26f7c3af7a of 2026-11-28T03:41:26Z, with uncommitted changes, go1.26.8"; got != want {
		t.Errorf("version %q, want %q", got, want)
	}
	if got, want := versionOf(&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "peal", Version: "(devel)"}}),
		"peal (devel), no commit recorded (built by go run, or with -buildvcs=false), go1.26.8"; got != want {
		t.Errorf("version %q, want %q", got, want)
	}
	// The program says what its own build information says.
	r := runMain("--version")
	if r.code != 0 || r.stdout != version()+"\n" || !strings.HasPrefix(r.stdout, "peal ") {
		t.Fatalf("--version: exit %d, %q", r.code, r.stdout)
	}
}
