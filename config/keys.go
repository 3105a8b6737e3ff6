package config

import (
	"strings"

	"peal/agent"
)

// Kind says how a key's raw value is parsed, whichever layer it comes from.
type Kind int

const (
	KindString     Kind = iota
	KindPath            // a file-system path; same parsing as KindString
	KindEnum            // a string restricted to Key.Enum
	KindBool            // true/false
	KindU32             // non-negative integer below 2^32
	KindU64             // non-negative integer
	KindCommands        // list of command strings; env/flag text splits on commas
	KindArgs            // list of arguments; env/flag text splits on commas and whitespace
	KindPatterns        // list of {pattern, reason}; env text is "pattern|reason,..."
	KindSeverities      // list of review severities; env/flag text splits on commas
	KindList            // list of strings; env/flag text splits on commas
	KindF64             // non-negative decimal number
)

// Key describes one configuration key: its names in every layer and its default.
// Env names are always "PEAL_" + the upper-cased Name, dots becoming underscores.
type Key struct {
	Name    string // TOML key, also the key of Config's `key` struct tag
	Flag    string // flag name without dashes; "" when the key has no flag
	Kind    Kind
	Enum    []string
	Default any    // nil means unset; otherwise a value of the parsed type
	Type    string // type as documented
	Help    string
}

// Env returns the environment variable that sets the key.
func (k Key) Env() string {
	return "PEAL_" + strings.ToUpper(strings.ReplaceAll(k.Name, ".", "_"))
}

// FlagName returns "--flag" or "" when the key cannot be set by a flag.
func (k Key) FlagName() string {
	if k.Flag == "" {
		return ""
	}
	return "--" + k.Flag
}

// DismissReasons are the reasons stet accepts for `stet dismiss`.
var DismissReasons = []string{"false_positive", "already_correct", "wrong_suggestion", "out_of_scope"}

// Severities are the quality-gate severities of the retry-state store, in
// ticketflow's order.
var Severities = []string{"Critical", "Major", "Minor", "Warnings", "Suggestions"}

// Keys is the single table of configuration keys; config loading, validation,
// help text and the documentation checks all read it.
var Keys = []Key{
	{Name: "plan_path", Flag: "plan", Kind: KindPath, Type: "path", Help: "Markdown plan to execute (required)"},
	{Name: "repo_path", Flag: "repo", Kind: KindPath, Type: "path", Help: "Git work tree the agent works in (required)"},
	{Name: "agent_kind", Flag: "agent-kind", Kind: KindEnum, Enum: agent.Names(), Default: agent.Default, Type: strings.Join(agent.Names(), "|"), Help: "Which agent CLI peal drives: its argv, prompt delivery, failure messages and events"},
	{Name: "agent_cmd", Flag: "agent-cmd", Kind: KindString, Type: "string", Help: "Agent CLI: a name on PATH or a path to an executable (unset: the kind's usual binary, e.g. agent for cursor)"},
	{Name: "agent_extra_args", Flag: "agent-extra-args", Kind: KindArgs, Default: []string{}, Type: "list", Help: "Arguments added to every agent call after peal's own, before the prompt (comma or space separated)"},
	{Name: "model", Flag: "model", Kind: KindString, Type: "string", Help: "Model passed to the agent as --model (unset: none)"},
	{Name: "sandbox", Flag: "sandbox", Kind: KindString, Default: "disabled", Type: "string", Help: "Value of --sandbox for execute, address and triage calls"},
	{Name: "state_dir", Flag: "state-dir", Kind: KindPath, Default: ".peal", Type: "path", Help: "Folder for state.json and the run summary"},
	{Name: "phase_timeout_sec", Flag: "phase-timeout-sec", Kind: KindU64, Default: uint64(1800), Type: "u64", Help: "Timeout of one agent or stet call, in seconds"},
	{Name: "phase_retry_count", Flag: "phase-retry-count", Kind: KindU32, Default: uint64(0), Type: "u32", Help: "Retries of plan and execute calls after a timeout or non-zero exit"},
	{Name: "phase_3_retry_count", Flag: "phase-3-retry-count", Kind: KindU32, Default: uint64(0), Type: "u32", Help: "Retries of address and triage calls (at most 2 are used)"},
	{Name: "parallel", Flag: "parallel", Kind: KindBool, Default: false, Type: "bool", Help: "Run (parallel) task blocks concurrently"},
	{Name: "max_parallel", Flag: "max-parallel", Kind: KindU32, Default: uint64(4), Type: "u32", Help: "Most agents running at once in a parallel block (0 turns parallel off)"},
	{Name: "continue_with_remaining_tasks", Flag: "continue-with-remaining-tasks", Kind: KindBool, Default: false, Type: "bool", Help: "Record a failed task and go on with the next (exit 2)"},
	{Name: "max_consecutive_task_failures", Flag: "max-consecutive-task-failures", Kind: KindU32, Type: "u32", Help: "Stop the run (exit 3) after this many task failures in a row (unset: no cap)"},
	{Name: "max_address_rounds", Flag: "max-address-rounds", Kind: KindU32, Default: uint64(5), Type: "u32", Help: "Most address rounds per task in Phase 3"},
	{Name: "on_findings_remaining", Flag: "on-findings-remaining", Kind: KindEnum, Enum: []string{"fail", "warn", "defer"}, Default: "fail", Type: "fail|warn|defer", Help: "What a task left with findings after the last round does"},
	{Name: "on_stet_fail", Flag: "on-stet-fail", Kind: KindEnum, Enum: []string{"fail", "retry_once", "skip"}, Default: "fail", Type: "fail|retry_once|skip", Help: "What a failed stet call does"},
	{Name: "stet_path", Flag: "stet-path", Kind: KindPath, Type: "path", Help: "stet executable (unset: stet on PATH)"},
	{Name: "stet_start_ref", Flag: "stet-start-ref", Kind: KindString, Type: "string", Help: "Ref passed to stet start"},
	{Name: "stet_start_extra_args", Flag: "stet-start-args", Kind: KindArgs, Default: []string{}, Type: "list", Help: "Extra arguments of stet start (comma or space separated)"},
	{Name: "stet_run_extra_args", Flag: "stet-run-args", Kind: KindArgs, Default: []string{}, Type: "list", Help: "Extra arguments of stet run (comma or space separated)"},
	{Name: "stet_commands", Kind: KindCommands, Default: []string{}, Type: "list of command strings", Help: "Custom review commands replacing the built-in stet sequence"},
	{Name: "stet_disable_llm_triage", Flag: "stet-disable-llm-triage", Kind: KindBool, Default: false, Type: "bool", Help: "Dismiss findings by stet_dismiss_patterns instead of asking the agent"},
	{Name: "stet_dismiss_patterns", Kind: KindPatterns, Default: []DismissPattern{}, Type: "list of {pattern, reason}", Help: "Findings to dismiss when LLM triage is disabled"},
	{Name: "post_run_commands", Flag: "post-run-commands", Kind: KindCommands, Default: []string{}, Type: "list of command strings", Help: "Commands run in the repo after a run that did not fail hard (comma separated)"},
	{Name: "post_run_timeout_sec", Flag: "post-run-timeout-sec", Kind: KindU64, Type: "u64", Help: "Timeout of each post-run command (unset: phase_timeout_sec)"},
	{Name: "normalize_plan", Flag: "normalize", Kind: KindBool, Default: false, Type: "bool", Help: "Let the agent convert a plan without task headings"},
	{Name: "normalize_retry_count", Flag: "normalize-retry-count", Kind: KindU32, Default: uint64(0), Type: "u32", Help: "Retries of the normalize call"},
	{Name: "normalize_prompt_path", Kind: KindPath, Type: "path", Help: "File replacing the built-in normalize prompt ({{DOC}} is the document)"},
	{Name: "validate_plan_text", Flag: "validate-plan-text", Kind: KindBool, Default: false, Type: "bool", Help: "Run the plan call once more when its text is empty or too short"},
	{Name: "min_plan_text_len", Flag: "min-plan-text-len", Kind: KindU64, Type: "u64", Help: "Shortest plan text accepted by validate_plan_text"},
	{Name: "run_summary_path", Flag: "run-summary-path", Kind: KindPath, Type: "path", Help: "Where the run summary is written (unset: {state_dir}/run_summary.json)"},
	{Name: "commit_after_phase2", Flag: "commit-after-phase2", Kind: KindBool, Default: false, Type: "bool", Help: "git add -A and commit after each successful execute"},
	{Name: "log_level", Flag: "log-level", Kind: KindEnum, Enum: []string{"debug", "info", "warn", "error"}, Default: "info", Type: "debug|info|warn|error", Help: "Level of the log on stderr and in log_file"},
	{Name: "log_file", Flag: "log-file", Kind: KindPath, Type: "path", Help: "File that JSON log lines are appended to"},
	{Name: "agent_log_dir", Flag: "agent-log-dir", Kind: KindPath, Type: "path", Help: "Folder that gets the whole stdout and stderr of every agent call attempt, one file each (unset: off)"},
	{Name: "kill_grace_sec", Flag: "kill-grace-sec", Kind: KindU64, Default: uint64(5), Type: "u64", Help: "Seconds between SIGTERM and SIGKILL to a child's process group"},
	{Name: "idle_timeout_sec", Flag: "idle-timeout-sec", Kind: KindU64, Default: uint64(0), Type: "u64", Help: "A call silent on stdout and stderr this long times out (0: off)"},
	{Name: "network_retry_count", Flag: "network-retry-count", Kind: KindU32, Default: uint64(2), Type: "u32", Help: "Retries of agent calls that failed with a network error (apart from the retry counts)"},
	{Name: "network_retry_delay_sec", Flag: "network-retry-delay-sec", Kind: KindU64, Default: uint64(60), Type: "u64", Help: "First wait before a network retry; it doubles each time, ±20% jitter"},
	{Name: "network_retry_max_delay_sec", Flag: "network-retry-max-delay-sec", Kind: KindU64, Default: uint64(600), Type: "u64", Help: "Longest wait before a network retry"},
	{Name: "network_error_patterns", Flag: "network-error-patterns", Kind: KindList, Default: []string{}, Type: "list of strings", Help: "Case-insensitive texts of stderr or the stdout tail that mark a network failure, on top of the agent kind's own"},
	{Name: "fatal_error_patterns", Flag: "fatal-error-patterns", Kind: KindList, Default: []string{}, Type: "list of strings", Help: "Case-insensitive texts that mark a failure no retry can heal (not retried), on top of the agent kind's own"},
	{Name: "builtin_error_patterns", Flag: "builtin-error-patterns", Kind: KindBool, Default: true, Type: "bool", Help: "Use the agent kind's own failure messages and exit codes (false: only fatal_error_patterns and network_error_patterns)"},
	{Name: "network_stall_sec", Flag: "network-stall-sec", Kind: KindU64, Default: uint64(60), Type: "u64", Help: "End an agent attempt that printed nothing but network errors for this long, as a network failure (0: off)"},
	{Name: "rate_limit_max_wait_sec", Flag: "rate-limit-max-wait-sec", Kind: KindU64, Default: uint64(1800), Type: "u64", Help: "Most time one agent call waits on rate limits, in all; a reset announced beyond it fails at once"},
	{Name: "structured_output", Flag: "structured-output", Kind: KindBool, Default: false, Type: "bool", Help: "Ask the agent for its event stream: the result event ends the call, tokens and cost are counted"},
	{Name: "max_cost_usd", Flag: "max-cost-usd", Kind: KindF64, Type: "f64", Help: "Stop the run (exit 3) after the call that brings the run's cost to this many US dollars (needs structured_output and a CLI that reports cost)"},
	{Name: "cursor_trust", Flag: "cursor-trust", Kind: KindBool, Default: true, Type: "bool", Help: "Pass --trust to every Cursor CLI call: trust the repository as a workspace without asking"},
	{Name: "cursor_force", Flag: "cursor-force", Kind: KindBool, Default: true, Type: "bool", Help: "Pass --force to Cursor CLI execute and address calls: run commands without asking for approval"},
	{Name: "retry_delay_sec", Flag: "retry-delay-sec", Kind: KindU64, Default: uint64(0), Type: "u64", Help: "First wait before an ordinary retry; it doubles each time (0: none)"},
	{Name: "fallback_agent_cmd", Flag: "fallback-agent-cmd", Kind: KindString, Type: "string", Help: "Agent CLI used by even attempts of a call (unset: always the primary, unless fallback_agent_kind is set)"},
	{Name: "fallback_agent_kind", Flag: "fallback-agent-kind", Kind: KindEnum, Enum: agent.Names(), Type: strings.Join(agent.Names(), "|"), Help: "Kind of the fallback agent (unset: agent_kind); setting it alone uses that kind's usual binary as the fallback"},
	{Name: "fallback_model", Flag: "fallback-model", Kind: KindString, Type: "string", Help: "Model of fallback attempts (unset: the model the primary would get)"},
	{Name: "plateau_rounds", Flag: "plateau-rounds", Kind: KindU32, Default: uint64(0), Type: "u32", Help: "End the address loop after this many rounds in a row without fewer findings (0: off)"},
	{Name: "knowledge_dir", Flag: "knowledge-dir", Kind: KindPath, Type: "path", Help: "Retry-state store (unset: <repo>/.tf/knowledge when <repo>/.tf exists, else {state_dir}/knowledge)"},
	{Name: "ticket_id", Flag: "ticket", Kind: KindString, Type: "string", Help: "Run the whole plan as one attempt of this ticket (unset: one ticket per task)"},
	{Name: "ticket_prefix", Flag: "ticket-prefix", Kind: KindString, Type: "string", Help: "Prefix of per-task ticket ids <prefix>-<task> (unset: from the plan file name)"},
	{Name: "fail_on", Flag: "fail-on", Kind: KindSeverities, Default: []string{"Critical", "Major"}, Type: "list of severities", Help: "Severities of left-over findings that block a ticket (empty: no gate)"},
	{Name: "escalation.enabled", Flag: "escalation", Kind: KindBool, Default: false, Type: "bool", Help: "Escalate models on retried tickets and skip exhausted ones"},
	{Name: "escalation.max_retries", Flag: "max-retries", Kind: KindU32, Default: uint64(3), Type: "u32", Help: "Blocked attempts after which a ticket is skipped"},
	{Name: "escalation.fixer", Flag: "escalation-fixer", Kind: KindString, Type: "string", Help: "Model of address calls from attempt 2 (unset: the base model)"},
	{Name: "escalation.reviewer_second_opinion", Flag: "escalation-reviewer-second-opinion", Kind: KindString, Type: "string", Help: "Model of triage calls from attempt 3 (unset: the base model)"},
	{Name: "escalation.worker", Flag: "escalation-worker", Kind: KindString, Type: "string", Help: "Model of plan and execute calls from attempt 3 (unset: the base model)"},
}

// KeyByName returns the key named name.
func KeyByName(name string) (Key, bool) {
	for _, k := range Keys {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}
