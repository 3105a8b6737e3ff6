package main

import (
	"fmt"
	"strings"

	"github.com/alecthomas/kong"

	"peal/config"
)

// RunFlags are the flags shared by every command that resolves a run's
// configuration. A field tagged `peal` sets that configuration key; its help
// text, variable and default come from config.Keys. Non-bool values are taken
// as text so that flags and variables go through the same parser.
type RunFlags struct {
	Config   string  `help:"TOML config file (no file is read without it)." placeholder:"PATH" type:"path"`
	Task     *uint32 `help:"Run only task N." placeholder:"N" xor:"task-select"`
	FromTask *uint32 `help:"Run task N and every later task." placeholder:"N" xor:"task-select"`

	Plan                       string `peal:"plan_path" placeholder:"PATH"`
	Repo                       string `peal:"repo_path" placeholder:"PATH"`
	AgentKind                  string `peal:"agent_kind" placeholder:"KIND"`
	AgentCmd                   string `peal:"agent_cmd" placeholder:"CMD"`
	AgentExtraArgs             string `peal:"agent_extra_args" placeholder:"ARGS"`
	Model                      string `peal:"model" placeholder:"MODEL"`
	Sandbox                    string `peal:"sandbox" placeholder:"MODE"`
	StateDir                   string `peal:"state_dir" placeholder:"PATH"`
	PhaseTimeoutSec            string `peal:"phase_timeout_sec" placeholder:"SEC"`
	PhaseRetryCount            string `peal:"phase_retry_count" placeholder:"N"`
	Phase3RetryCount           string `peal:"phase_3_retry_count" name:"phase-3-retry-count" placeholder:"N"`
	Parallel                   bool   `peal:"parallel" negatable:""`
	MaxParallel                string `peal:"max_parallel" placeholder:"N"`
	ContinueWithRemainingTasks bool   `peal:"continue_with_remaining_tasks" negatable:""`
	MaxConsecutiveTaskFailures string `peal:"max_consecutive_task_failures" placeholder:"N"`
	MaxAddressRounds           string `peal:"max_address_rounds" placeholder:"N"`
	OnFindingsRemaining        string `peal:"on_findings_remaining" placeholder:"fail|warn"`
	OnStetFail                 string `peal:"on_stet_fail" placeholder:"fail|retry_once|skip"`
	StetPath                   string `peal:"stet_path" placeholder:"PATH"`
	StetStartRef               string `peal:"stet_start_ref" placeholder:"REF"`
	StetStartArgs              string `peal:"stet_start_extra_args" placeholder:"ARGS"`
	StetRunArgs                string `peal:"stet_run_extra_args" placeholder:"ARGS"`
	StetDisableLLMTriage       bool   `peal:"stet_disable_llm_triage" name:"stet-disable-llm-triage" negatable:""`
	PostRunCommands            string `peal:"post_run_commands" placeholder:"CMDS"`
	PostRunTimeoutSec          string `peal:"post_run_timeout_sec" placeholder:"SEC"`
	Normalize                  bool   `peal:"normalize_plan" negatable:""`
	NormalizeRetryCount        string `peal:"normalize_retry_count" placeholder:"N"`
	ValidatePlanText           bool   `peal:"validate_plan_text" negatable:""`
	MinPlanTextLen             string `peal:"min_plan_text_len" placeholder:"N"`
	RunSummaryPath             string `peal:"run_summary_path" placeholder:"PATH"`
	CommitAfterPhase2          bool   `peal:"commit_after_phase2" name:"commit-after-phase2" negatable:""`
	LogLevel                   string `peal:"log_level" placeholder:"LEVEL"`
	LogFile                    string `peal:"log_file" placeholder:"PATH"`
	AgentLogDir                string `peal:"agent_log_dir" placeholder:"PATH"`
	KillGraceSec               string `peal:"kill_grace_sec" placeholder:"SEC"`
	IdleTimeoutSec             string `peal:"idle_timeout_sec" placeholder:"SEC"`
	NetworkRetryCount          string `peal:"network_retry_count" placeholder:"N"`
	NetworkRetryDelaySec       string `peal:"network_retry_delay_sec" placeholder:"SEC"`
	NetworkRetryMaxDelaySec    string `peal:"network_retry_max_delay_sec" placeholder:"SEC"`
	NetworkErrorPatterns       string `peal:"network_error_patterns" placeholder:"TEXTS"`
	FatalErrorPatterns         string `peal:"fatal_error_patterns" placeholder:"TEXTS"`
	BuiltinErrorPatterns       bool   `peal:"builtin_error_patterns" negatable:""`
	NetworkStallSec            string `peal:"network_stall_sec" placeholder:"SEC"`
	RateLimitMaxWaitSec        string `peal:"rate_limit_max_wait_sec" placeholder:"SEC"`
	StructuredOutput           bool   `peal:"structured_output" negatable:""`
	MaxCostUSD                 string `peal:"max_cost_usd" name:"max-cost-usd" placeholder:"USD"`
	CursorTrust                bool   `peal:"cursor_trust" negatable:""`
	CursorForce                bool   `peal:"cursor_force" negatable:""`
	RetryDelaySec              string `peal:"retry_delay_sec" placeholder:"SEC"`
	FallbackAgentCmd           string `peal:"fallback_agent_cmd" placeholder:"CMD"`
	FallbackAgentKind          string `peal:"fallback_agent_kind" placeholder:"KIND"`
	FallbackModel              string `peal:"fallback_model" placeholder:"MODEL"`
	PlateauRounds              string `peal:"plateau_rounds" placeholder:"N"`
	KnowledgeDir               string `peal:"knowledge_dir" placeholder:"PATH"`
	Ticket                     string `peal:"ticket_id" placeholder:"ID"`
	TicketPrefix               string `peal:"ticket_prefix" placeholder:"PREFIX"`
	FailOn                     string `peal:"fail_on" placeholder:"SEVERITIES"`
	Escalation                 bool   `peal:"escalation.enabled" negatable:""`
	MaxRetries                 string `peal:"escalation.max_retries" placeholder:"N"`
	EscalationFixer            string `peal:"escalation.fixer" placeholder:"MODEL"`
	EscalationSecondOpinion    string `peal:"escalation.reviewer_second_opinion" name:"escalation-reviewer-second-opinion" placeholder:"MODEL"`
	EscalationWorker           string `peal:"escalation.worker" placeholder:"MODEL"`
	RetryReset                 bool   `help:"Back up the retry state of this run's tickets before it starts (fresh attempt 1, base models)."`
}

// flagValues collects the configuration flags actually given on the command
// line, as text keyed by configuration key.
func flagValues(kctx *kong.Context) map[string]string {
	out := map[string]string{}
	for _, f := range kctx.Flags() {
		key := f.Tag.Get("peal")
		if key == "" || !f.Set {
			continue
		}
		out[key] = fmt.Sprint(f.Target.Interface())
	}
	return out
}

// load resolves and validates the configuration of a run command.
func (f *RunFlags) load(kctx *kong.Context, environ []string) (*config.Config, error) {
	cfg, err := config.Load(config.Inputs{Flags: flagValues(kctx), Env: environ, ConfigPath: f.Config})
	if err != nil {
		return nil, err
	}
	cfg.Task, cfg.FromTask, cfg.RetryReset = f.Task, f.FromTask, f.RetryReset
	return cfg, cfg.Validate()
}

// helpValue writes each configuration flag's help from config.Keys, with the
// variable that also sets it and its default.
func helpValue(v *kong.Value) string {
	key := ""
	if v.Tag != nil {
		key = v.Tag.Get("peal")
	}
	k, ok := config.KeyByName(key)
	if !ok {
		return v.Help
	}
	return fmt.Sprintf("%s [%s; default: %s]", k.Help, k.Env(), defaultText(k))
}

func defaultText(k config.Key) string {
	switch d := k.Default.(type) {
	case nil:
		if k.Name == "run_summary_path" {
			return "{state_dir}/run_summary.json"
		}
		return "unset"
	case []string:
		if len(d) > 3 {
			return fmt.Sprintf("%d built-in texts, see docs/configuration.md", len(d))
		}
		if len(d) > 0 {
			return strings.Join(d, ",")
		}
		return "none"
	case []config.DismissPattern:
		return "none"
	case string:
		return d
	default:
		return fmt.Sprint(d)
	}
}
