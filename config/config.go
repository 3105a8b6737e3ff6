// Package config owns peal's configuration: the four layers (built-in default <
// TOML file < PEAL_* environment < flag), where every resolved value came from,
// and the validation that runs before any child process starts.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	toml "github.com/pelletier/go-toml/v2"

	"peal/agent"
)

// Source names the layer a value came from.
type Source string

const (
	SourceDefault    Source = "default"
	SourceTFSettings Source = "tf-settings"
	SourceFile       Source = "file"
	SourceEnv        Source = "env"
	SourceFlag       Source = "flag"
)

// Config is the resolved configuration of one peal run. Fields tagged `key`
// are filled from the layers by Load; the others are derived or flag-only.
type Config struct {
	PlanPath                   string           `key:"plan_path"`
	RepoPath                   string           `key:"repo_path"`
	AgentKind                  string           `key:"agent_kind"`
	AgentCmd                   string           `key:"agent_cmd"`
	AgentExtraArgs             []string         `key:"agent_extra_args"`
	Model                      string           `key:"model"`
	Sandbox                    string           `key:"sandbox"`
	StateDir                   string           `key:"state_dir"`
	PhaseTimeoutSec            uint64           `key:"phase_timeout_sec"`
	PhaseRetryCount            uint32           `key:"phase_retry_count"`
	Phase3RetryCount           uint32           `key:"phase_3_retry_count"`
	Parallel                   bool             `key:"parallel"`
	MaxParallel                uint32           `key:"max_parallel"`
	ContinueWithRemainingTasks bool             `key:"continue_with_remaining_tasks"`
	MaxConsecutiveTaskFailures *uint32          `key:"max_consecutive_task_failures"`
	MaxAddressRounds           uint32           `key:"max_address_rounds"`
	OnFindingsRemaining        string           `key:"on_findings_remaining"`
	OnStetFail                 string           `key:"on_stet_fail"`
	StetPath                   string           `key:"stet_path"`
	StetStartRef               string           `key:"stet_start_ref"`
	StetStartExtraArgs         []string         `key:"stet_start_extra_args"`
	StetRunExtraArgs           []string         `key:"stet_run_extra_args"`
	StetCommands               []string         `key:"stet_commands"`
	StetDisableLLMTriage       bool             `key:"stet_disable_llm_triage"`
	StetDismissPatterns        []DismissPattern `key:"stet_dismiss_patterns"`
	PostRunCommands            []string         `key:"post_run_commands"`
	PostRunTimeoutSec          *uint64          `key:"post_run_timeout_sec"`
	NormalizePlan              bool             `key:"normalize_plan"`
	NormalizeRetryCount        uint32           `key:"normalize_retry_count"`
	NormalizePromptPath        string           `key:"normalize_prompt_path"`
	ValidatePlanText           bool             `key:"validate_plan_text"`
	MinPlanTextLen             *uint64          `key:"min_plan_text_len"`
	RunSummaryPath             string           `key:"run_summary_path"`
	CommitAfterPhase2          bool             `key:"commit_after_phase2"`
	LogLevel                   string           `key:"log_level"`
	LogFile                    string           `key:"log_file"`
	AgentLogDir                string           `key:"agent_log_dir"`
	KillGraceSec               uint64           `key:"kill_grace_sec"`
	IdleTimeoutSec             uint64           `key:"idle_timeout_sec"`
	NetworkRetryCount          uint32           `key:"network_retry_count"`
	NetworkRetryDelaySec       uint64           `key:"network_retry_delay_sec"`
	NetworkRetryMaxDelaySec    uint64           `key:"network_retry_max_delay_sec"`
	NetworkErrorPatterns       []string         `key:"network_error_patterns"`
	FatalErrorPatterns         []string         `key:"fatal_error_patterns"`
	BuiltinErrorPatterns       bool             `key:"builtin_error_patterns"`
	NetworkStallSec            uint64           `key:"network_stall_sec"`
	RateLimitMaxWaitSec        uint64           `key:"rate_limit_max_wait_sec"`
	StructuredOutput           bool             `key:"structured_output"`
	MaxCostUSD                 *float64         `key:"max_cost_usd"`
	CursorTrust                bool             `key:"cursor_trust"`
	CursorForce                bool             `key:"cursor_force"`
	RetryDelaySec              uint64           `key:"retry_delay_sec"`
	FallbackAgentCmd           string           `key:"fallback_agent_cmd"`
	FallbackAgentKind          string           `key:"fallback_agent_kind"`
	FallbackModel              string           `key:"fallback_model"`
	PlateauRounds              uint32           `key:"plateau_rounds"`
	KnowledgeDir               string           `key:"knowledge_dir"`
	TicketID                   string           `key:"ticket_id"`
	TicketPrefix               string           `key:"ticket_prefix"`
	FailOn                     []string         `key:"fail_on"`
	EscalationEnabled          bool             `key:"escalation.enabled"`
	EscalationMaxRetries       uint32           `key:"escalation.max_retries"`
	EscalationFixer            string           `key:"escalation.fixer"`
	EscalationSecondOpinion    string           `key:"escalation.reviewer_second_opinion"`
	EscalationWorker           string           `key:"escalation.worker"`

	// ConfigPath is the TOML file read, "" when none.
	ConfigPath string
	// Task and FromTask come from --task and --from-task only.
	Task, FromTask *uint32
	// RetryReset comes from --retry-reset only: back up the retry state of
	// this run's tickets before it starts.
	RetryReset bool
	// AgentPath is agent_cmd resolved to an executable by Validate, and
	// FallbackPath fallback_agent_cmd ("" when there is no fallback agent).
	AgentPath, FallbackPath string
	// Sources tells, for every key, the layer its value came from.
	Sources map[string]Source
	// Warnings are problems that do not stop the run (an unreadable
	// ticketflow settings file), for the caller to log.
	Warnings []string
}

// Inputs are the raw layers handed to Load.
type Inputs struct {
	// Flags maps key names to the text given on the command line; only flags
	// actually given appear.
	Flags map[string]string
	// Env is the process environment in os.Environ form.
	Env []string
	// ConfigPath is the --config argument ("" when not given).
	ConfigPath string
}

// layer is one source of raw values, already parsed into the keys' types.
type layer struct {
	source Source
	values map[string]any
}

// Load merges the layers, flag > env > file > default, and records the source
// of every value. Every error names the flag, variable, file or key to fix.
func Load(in Inputs) (*Config, error) {
	flags, err := flagLayer(in.Flags)
	if err != nil {
		return nil, err
	}
	env, err := envLayer(in.Env)
	if err != nil {
		return nil, err
	}
	file := layer{source: SourceFile, values: map[string]any{}}
	if in.ConfigPath != "" {
		if file.values, err = LoadFile(in.ConfigPath); err != nil {
			return nil, err
		}
	}
	tf, warnings := tfSettingsLayer(repoFrom(flags, env, file))
	defaults := layer{source: SourceDefault, values: map[string]any{}}
	for _, k := range Keys {
		if k.Default != nil {
			defaults.values[k.Name] = k.Default
		}
	}
	cfg := &Config{ConfigPath: in.ConfigPath, Sources: map[string]Source{}, Warnings: warnings}
	resolved := map[string]any{}
	for _, k := range Keys {
		cfg.Sources[k.Name] = SourceDefault // unset keys are default too
		for _, l := range []layer{flags, env, file, tf, defaults} {
			if v, ok := l.values[k.Name]; ok {
				resolved[k.Name] = v
				cfg.Sources[k.Name] = l.source
				break
			}
		}
	}
	assign(cfg, resolved)
	cfg.resolveParallel()
	cfg.resolveAgentCmd()
	if cfg.RunSummaryPath == "" {
		cfg.RunSummaryPath = filepath.Join(cfg.StateDir, "run_summary.json")
		cfg.Sources["run_summary_path"] = SourceDefault
	}
	return cfg, nil
}

// repoFrom is repo_path as the layers above the ticketflow settings give it.
func repoFrom(layers ...layer) string {
	for _, l := range layers {
		if v, ok := l.values["repo_path"].(string); ok && v != "" {
			return v
		}
	}
	return ""
}

// resolveAgentCmd fills agent_cmd, when no layer set it, with the usual
// binary of agent_kind, and fallback_agent_cmd, when only
// fallback_agent_kind is set, with that kind's.
func (c *Config) resolveAgentCmd() {
	if k, err := agent.Lookup(c.AgentKind); c.AgentCmd == "" && err == nil {
		c.AgentCmd = k.DefaultCmd
	}
	if c.FallbackAgentKind == "" {
		return
	}
	if k, err := agent.Lookup(c.FallbackAgentKind); c.FallbackAgentCmd == "" && err == nil {
		c.FallbackAgentCmd = k.DefaultCmd
	}
}

// resolveParallel applies the rules of A3: max_parallel = 0 forces parallel
// off; otherwise an explicit parallel wins; otherwise a max_parallel set by a
// layer turns it on.
func (c *Config) resolveParallel() {
	switch {
	case c.MaxParallel == 0:
		c.Parallel = false
	case c.Sources["parallel"] != SourceDefault:
	case c.Sources["max_parallel"] != SourceDefault:
		c.Parallel = true
	}
}

func flagLayer(raw map[string]string) (layer, error) {
	l := layer{source: SourceFlag, values: map[string]any{}}
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		k, ok := KeyByName(name)
		if !ok || k.Flag == "" {
			return l, fmt.Errorf("internal error: flag for unknown key %q", name)
		}
		v, err := parseText(k, raw[name], k.FlagName())
		if err != nil {
			return l, err
		}
		l.values[name] = v
	}
	return l, nil
}

func envLayer(environ []string) (layer, error) {
	l := layer{source: SourceEnv, values: map[string]any{}}
	env := map[string]string{}
	for _, kv := range environ {
		if name, value, ok := strings.Cut(kv, "="); ok {
			env[name] = value
		}
	}
	for _, k := range Keys {
		raw := env[k.Env()]
		if raw == "" { // an empty variable counts as unset
			continue
		}
		v, err := parseText(k, raw, k.Env())
		if err != nil {
			return l, err
		}
		l.values[k.Name] = v
	}
	return l, nil
}

// LoadFile reads a TOML config file strictly: a syntax error gives the line,
// an unknown key or a wrong type names the key.
func LoadFile(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, unwrapPathError(err))
	}
	return parseFile(path, data)
}

func parseFile(path string, data []byte) (map[string]any, error) {
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("config file %s: line %d, column %d: %s", path, row, col, de.Error())
		}
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	out := map[string]any{}
	if err := flatten(path, "", doc, out); err != nil {
		return nil, err
	}
	return out, nil
}

// flatten maps nested TOML tables to dotted key names and parses each value.
func flatten(path, prefix string, doc map[string]any, out map[string]any) error {
	names := make([]string, 0, len(doc))
	for name := range doc {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		full := prefix + name
		v := doc[name]
		k, ok := KeyByName(full)
		if !ok {
			if table, isTable := v.(map[string]any); isTable && hasKeyPrefix(full+".") {
				if err := flatten(path, full+".", table, out); err != nil {
					return err
				}
				continue
			}
			return fmt.Errorf("config file %s: unknown key %q", path, full)
		}
		parsed, err := parseTOML(k, v, fmt.Sprintf("config file %s: key %s", path, full))
		if err != nil {
			return err
		}
		out[full] = parsed
	}
	return nil
}

func hasKeyPrefix(prefix string) bool {
	for _, k := range Keys {
		if strings.HasPrefix(k.Name, prefix) {
			return true
		}
	}
	return false
}

// assign stores the resolved values into the Config fields tagged with their key.
func assign(cfg *Config, values map[string]any) {
	rv := reflect.ValueOf(cfg).Elem()
	rt := rv.Type()
	for i := 0; i < rt.NumField(); i++ {
		name := rt.Field(i).Tag.Get("key")
		if name == "" {
			continue
		}
		v, ok := values[name]
		if !ok {
			continue
		}
		f := rv.Field(i)
		switch f.Kind() {
		case reflect.Uint32, reflect.Uint64:
			f.SetUint(v.(uint64))
		case reflect.Pointer:
			p := reflect.New(f.Type().Elem())
			if x, ok := v.(float64); ok {
				p.Elem().SetFloat(x)
			} else {
				p.Elem().SetUint(v.(uint64))
			}
			f.Set(p)
		default:
			f.Set(reflect.ValueOf(v))
		}
	}
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Value is the resolved value of a key in its TOML type: a string, bool,
// uint64, []string or []DismissPattern; nil when unset.
func (c *Config) Value(name string) any {
	rv := reflect.ValueOf(c).Elem()
	rt := rv.Type()
	for i := 0; i < rt.NumField(); i++ {
		if rt.Field(i).Tag.Get("key") != name {
			continue
		}
		f := rv.Field(i)
		switch {
		case f.Kind() == reflect.Pointer && f.IsNil():
			return nil
		case f.Kind() == reflect.Pointer && f.Elem().Kind() == reflect.Float64:
			return f.Elem().Float()
		case f.Kind() == reflect.Pointer:
			return f.Elem().Uint()
		case f.Kind() == reflect.Uint32 || f.Kind() == reflect.Uint64:
			return f.Uint()
		case f.Kind() == reflect.String && f.String() == "":
			return nil
		}
		return f.Interface()
	}
	return nil
}
