// Package config owns peal's configuration: the four layers (built-in default <
// TOML file < PEAL_* environment < flag), where every resolved value came from,
// and the validation that runs before any child process starts.
package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	toml "github.com/pelletier/go-toml/v2"

	"peal/agent"

	"peal/internal/safefs"
	"peal/phase"
	"peal/state"
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

// Config is the resolved configuration of one peal run.
//
// Every configuration key is declared once, here, as a field with tags; its
// flag, variable, parsing, default, help and documentation row are derived
// from the tags (see Keys). Adding a key is adding a field:
//
//	key         TOML name (dotted for a key in a table); the variable is PEAL_
//	            and the key upper-cased, dots becoming underscores
//	flag        flag name when it is not the key with dashes, or its first
//	            words (--plan for plan_path); "-" for none
//	wasflag     an old name of the flag, still taken, with a warning that
//	            names the new one: one name per setting in every layer
//	kind        path, commands, args, severities or loglevel when the Go type
//	            alone does not tell; a number named *_sec is in seconds,
//	            bounded by MaxSeconds
//	enum        the accepted values, comma separated; or @ and the name of
//	            a list declared elsewhere (enumLists): @agent.Names
//	default     the default as a variable would spell it (none: unset)
//	defaultdoc  how help and docs show the default, when not the value itself
//	required    `peal run` stops when the key is unset
//	placeholder the word for the value in --help (derived from the kind)
//	help        one line for --help and docs/configuration.md
//
// then a row in the key table of docs/configuration.md: `go test ./config
// -run TestDocumented -update` writes it. The fields without a `key` tag are
// derived or come from flags only.
type Config struct {
	PlanPath                   string           `key:"plan_path" flag:"plan" kind:"path" required:"" help:"Markdown plan to execute"`
	RepoPath                   string           `key:"repo_path" flag:"repo" kind:"path" required:"" help:"Git work tree the agent works in"`
	AgentKind                  string           `key:"agent_kind" enum:"@agent.Names" default:"cursor" help:"Which agent CLI peal drives: its argv, prompt delivery, failure messages and events (see docs/agents.md)"`
	AgentCmd                   string           `key:"agent_cmd" placeholder:"CMD" defaultdoc:"the kind's usual binary" help:"Agent CLI: a name on PATH or a path to an executable (unset: the kind's usual binary, e.g. agent for cursor)"`
	AgentExtraArgs             []string         `key:"agent_extra_args" kind:"args" help:"Arguments added to every agent call after peal's own, before the prompt (comma or space separated)"`
	Model                      string           `key:"model" placeholder:"MODEL" help:"Model passed to the agent as --model (unset: none)"`
	Sandbox                    string           `key:"sandbox" default:"disabled" placeholder:"MODE" help:"Value of --sandbox for execute, address and triage calls"`
	StateDir                   string           `key:"state_dir" kind:"path" default:".peal" help:"Folder for state.json, the run summary and the review state (created with a .gitignore that ignores everything in it); a run notes it in the repository, where commands started from another folder find it"`
	PhaseTimeoutSec            uint64           `key:"phase_timeout_sec" default:"1800" help:"Timeout of one agent, stet or git call, in seconds"`
	PhaseRetryCount            uint32           `key:"phase_retry_count" default:"0" help:"Retries of plan and execute calls after a timeout or non-zero exit"`
	Phase3RetryCount           uint32           `key:"phase_3_retry_count" default:"0" help:"Retries of address and triage calls (at most 2 are used)"`
	Parallel                   bool             `key:"parallel" default:"false" help:"Run (parallel) task blocks concurrently"`
	MaxParallel                uint32           `key:"max_parallel" default:"4" help:"Most agents running at once in a parallel block (0 turns parallel off)"`
	ParallelIsolation          IsolationMode    `key:"parallel_isolation" enum:"@parallel_isolation" default:"worktree" help:"Where the tasks of a parallel block work: worktree (each in a git worktree of its own, merged back in plan order) or shared (all in the one work tree)"`
	ParallelConflict           ConflictAction   `key:"parallel_conflict" enum:"@parallel_conflict" default:"retry" help:"What a task whose merge-back conflicts does: retry (run it again, alone, on the merged work after its block) or fail"`
	WorktreeSetupCommand       string           `key:"worktree_setup_command" placeholder:"CMD" help:"Command run in each new task worktree before its first agent call, under phase_timeout_sec (split on spaces, no shell); its failure fails the task"`
	WorktreeCopy               []string         `key:"worktree_copy" help:"Files or folders, relative to repo_path, copied from the work tree into each new task worktree (e.g. .env; comma separated)"`
	WorktreeSparsePaths        []string         `key:"worktree_sparse_paths" help:"Folders, relative to repo_path, that each new task worktree checks out, in git's cone mode, with the top-level files (unset: the whole tree; comma separated)"`
	WorktreeLink               []string         `key:"worktree_link" help:"Ignored folders or files, relative to repo_path, linked into each new task worktree from the work tree instead of copied (e.g. node_modules; shared by every task; comma separated)"`
	ContinueWithRemainingTasks bool             `key:"continue_with_remaining_tasks" default:"false" help:"Record a failed task and go on with the next (exit 2)"`
	MaxConsecutiveTaskFailures *uint32          `key:"max_consecutive_task_failures" help:"Stop the run (exit 3) after this many task failures in a row (unset: no cap)"`
	MaxAddressRounds           uint32           `key:"max_address_rounds" default:"5" help:"Most address rounds per task in Phase 3"`
	OnFindingsRemaining        FindingsAction   `key:"on_findings_remaining" enum:"@on_findings_remaining" default:"fail" help:"What a task left with findings or failing checks after the last round does"`
	CheckCommands              []string         `key:"check_commands" flag:"check-command" kind:"shell" help:"The project's checks (tests, build, linters), run in order through sh -c in the task's work tree after every execute and address round; a failing one goes to the agent to fix (variable: one command per line; flag: once per command)"`
	CheckTimeoutSec            *uint64          `key:"check_timeout_sec" help:"Timeout of each check command, in seconds (unset: phase_timeout_sec)"`
	OnStetFail                 StetFailAction   `key:"on_stet_fail" enum:"@on_stet_fail" default:"fail" help:"What a failed stet call does"`
	StetPath                   string           `key:"stet_path" kind:"path" help:"stet executable (unset: stet on PATH)"`
	StetStartRef               string           `key:"stet_start_ref" placeholder:"REF" help:"No effect (a warning): each task's review session starts at the commit before the task"`
	StetStartExtraArgs         []string         `key:"stet_start_extra_args" wasflag:"stet-start-args" kind:"args" help:"Extra arguments of stet start (comma or space separated)"`
	StetRunExtraArgs           []string         `key:"stet_run_extra_args" wasflag:"stet-run-args" kind:"args" help:"Extra arguments of stet run (comma or space separated); --stream, --json and --output are dropped with a warning"`
	StetCommands               []string         `key:"stet_commands" flag:"-" kind:"commands" help:"Custom review commands replacing the built-in stet sequence"`
	StetDisableLLMTriage       bool             `key:"stet_disable_llm_triage" default:"false" help:"Dismiss findings by stet_dismiss_patterns instead of asking the agent"`
	StetDismissPatterns        []DismissPattern `key:"stet_dismiss_patterns" flag:"-" help:"Findings to dismiss when LLM triage is disabled"`
	PostRunCommands            []string         `key:"post_run_commands" kind:"commands" help:"Commands run in the repo after a run that did not fail hard (comma separated)"`
	PostRunTimeoutSec          *uint64          `key:"post_run_timeout_sec" help:"Timeout of each post-run command (unset: phase_timeout_sec)"`
	PostRunConfined            bool             `key:"post_run_confined" default:"true" help:"Confine post_run_commands as checks in the work tree (false: they get peal's whole environment and may write anything, and run what a task wrote there with it)"`
	NormalizePlan              bool             `key:"normalize_plan" flag:"normalize" default:"false" help:"Let the agent convert a plan without task headings"`
	NormalizeRetryCount        uint32           `key:"normalize_retry_count" default:"0" help:"Retries of the normalize call"`
	NormalizePromptPath        string           `key:"normalize_prompt_path" flag:"-" kind:"path" help:"File replacing the built-in normalize prompt ({{DOC}} is the document)"`
	ValidatePlanText           bool             `key:"validate_plan_text" default:"false" help:"Run the plan call once more when its text is empty or too short"`
	MinPlanTextLen             *uint64          `key:"min_plan_text_len" help:"Shortest plan text accepted by validate_plan_text"`
	RunSummaryPath             string           `key:"run_summary_path" kind:"path" defaultdoc:"{state_dir}/run_summary.json" help:"Where the run summary is written"`
	CommitAfterPhase2          bool             `key:"commit_after_phase2" default:"false" help:"git add -A and commit after each successful execute (with stet: always)"`
	LogLevel                   string           `key:"log_level" kind:"loglevel" default:"info" help:"Level of the log on stderr (log_file gets every level): debug, info, warn, error, off, or directives such as peal=trace,warn"`
	LogFormat                  LogFormat        `key:"log_format" enum:"@log_format" default:"auto" help:"Form of the log on stderr: human (a record a line for a person: time, level, task, event, fields; a record wider than the terminal goes on over indented lines, nothing cut), logfmt (key=value lines), json (one object a line) or auto (human when stderr is a terminal, else logfmt)"`
	LogFile                    string           `key:"log_file" kind:"path" help:"File that JSON log lines of every level (debug included) are appended to"`
	ReportStepSummary          StepSummary      `key:"report_step_summary" enum:"@report_step_summary" default:"auto" help:"Whether peal report also appends its Markdown summary to the file $GITHUB_STEP_SUMMARY names, when that variable is set (auto: when CI=true)"`
	AgentLogDir                string           `key:"agent_log_dir" kind:"path" help:"Folder that gets the whole stdout and stderr of every agent call attempt, one file each (unset: off)"`
	KillGraceSec               uint64           `key:"kill_grace_sec" default:"5" help:"Seconds between SIGTERM and SIGKILL to a child's process group"`
	IdleTimeoutSec             uint64           `key:"idle_timeout_sec" default:"0" help:"An agent call silent on stdout and stderr this long times out (0: off; never stet, git or post-run commands)"`
	NetworkRetryCount          uint32           `key:"network_retry_count" default:"2" help:"Retries of agent calls that failed with a network error (apart from the retry counts)"`
	NetworkRetryDelaySec       uint64           `key:"network_retry_delay_sec" default:"10" help:"First wait before a network retry; it doubles each time, ±20% jitter"`
	NetworkRetryMaxDelaySec    uint64           `key:"network_retry_max_delay_sec" default:"600" help:"Longest wait before a network retry"`
	NetworkGiveUpSec           uint64           `key:"network_give_up_sec" default:"110" help:"No network retry of a call starts later than this many seconds after its first attempt began, so that an outage ends in exit 4 within minutes whatever the CLI (0: no limit)"`
	NetworkErrorPatterns       []string         `key:"network_error_patterns" help:"Case-insensitive texts of stderr or the stdout tail that mark a network failure, on top of the agent kind's own"`
	FatalErrorPatterns         []string         `key:"fatal_error_patterns" help:"Case-insensitive texts that mark a failure no retry can heal (not retried), on top of the agent kind's own"`
	BuiltinErrorPatterns       bool             `key:"builtin_error_patterns" default:"true" help:"Use the agent kind's own failure messages and exit codes (false: only fatal_error_patterns and network_error_patterns)"`
	NetworkStallSec            uint64           `key:"network_stall_sec" default:"30" help:"End an agent attempt that printed nothing but network errors for this long, as a network failure (0: off)"`
	RateLimitMaxWaitSec        uint64           `key:"rate_limit_max_wait_sec" default:"1800" help:"Most time one agent call waits on rate limits, in all, the CLI's own retries of them included; a time to retry announced beyond it fails at once"`
	StructuredOutput           bool             `key:"structured_output" default:"false" help:"Ask the agent for its event stream: the result event ends the call, tokens and cost are counted"`
	AgentSession               SessionMode      `key:"agent_session" enum:"@agent_session" default:"fresh" help:"How a task's agent calls share a conversation: fresh (each call starts one) or task (plan, execute and address continue one session per agent; asks for the agent's event stream as structured_output does)"`
	MaxCostUSD                 *float64         `key:"max_cost_usd" placeholder:"USD" help:"Stop the run (exit 3) after the call that brings the run's cost to this many US dollars (needs structured_output and a CLI that reports cost)"`
	MaxTokens                  *uint64          `key:"max_tokens" placeholder:"N" help:"Stop the run (exit 3) after the call that brings the run's tokens (input and output) to this many: as the agent's events count them (structured_output) or, for a call whose key peal holds, as the API's answers do"`
	CursorTrust                bool             `key:"cursor_trust" default:"true" help:"Pass --trust to every Cursor CLI call: trust the repository as a workspace without asking"`
	CursorForce                bool             `key:"cursor_force" default:"true" help:"Pass --force to Cursor CLI execute and address calls: run commands without asking for approval"`
	RetryDelaySec              uint64           `key:"retry_delay_sec" default:"0" help:"First wait before an ordinary retry; it doubles each time (0: none)"`
	FallbackAgentCmd           string           `key:"fallback_agent_cmd" placeholder:"CMD" help:"Agent CLI used by even attempts of a call (unset: always the primary, unless fallback_agent_kind is set)"`
	FallbackAgentKind          string           `key:"fallback_agent_kind" enum:"@agent.Names" help:"Kind of the fallback agent (unset: agent_kind); setting it alone uses that kind's usual binary as the fallback"`
	FallbackModel              string           `key:"fallback_model" placeholder:"MODEL" help:"Model of fallback attempts (unset: the model the primary would get)"`
	PlateauRounds              uint32           `key:"plateau_rounds" default:"0" help:"End the address loop after this many rounds in a row without fewer findings (0: off)"`
	KnowledgeDir               string           `key:"knowledge_dir" kind:"path" help:"Retry-state store (unset: <repo>/.tf/knowledge when <repo>/.tf exists, else {state_dir}/knowledge)"`
	TicketID                   string           `key:"ticket_id" flag:"ticket" placeholder:"ID" help:"Run the whole plan as one attempt of this ticket (unset: one ticket per task)"`
	TicketPrefix               string           `key:"ticket_prefix" placeholder:"PREFIX" help:"Prefix of per-task ticket ids <prefix>-<task> (unset: the plan file name and a hash of its path, unique per plan)"`
	FailOn                     []string         `key:"fail_on" kind:"severities" default:"Critical,Major" help:"Severities of left-over findings that block a ticket (empty: no gate)"`
	Confine                    ConfineMode      `key:"confine" enum:"@confine" default:"auto" help:"Confine every agent call, check and worktree_setup_command to its task, by the kernel: auto (what this machine enforces, said at the start), on (refuse to start where this machine cannot enforce all of it: files, the calls' namespaces, the filter of their system calls, calls without capabilities, no way around peal's proxy), off (none)"`
	ConfineWritePaths          []string         `key:"confine_write_paths" help:"Folders or files a confined call may write besides its work tree, its temporary folder, its CLI's folders and the build caches (full paths, ~ for the home folder; comma separated)"`
	ConfineReadPaths           []string         `key:"confine_read_paths" help:"Folders or files of the home folder (and of other users' home folders) a confined call may read besides its CLI's folders, the build caches, the toolchains its PATH leads to and the files git's configuration names: the rest of the home folder is unreadable (full paths, ~ for the home folder; comma separated)"`
	ConfineReadDeny            []string         `key:"confine_read_deny" help:"Files or folders no confined call may read, besides the built-in secrets (~/.ssh, ~/.aws, ~/.npmrc, …; full paths, ~ for the home folder; comma separated)"`
	ConfineGitCredentials      GitCredentials   `key:"confine_git_credentials" enum:"@confine_git_credentials" default:"refuse" help:"What a confined run does when the repository's git configuration, which its calls read, holds a credential (an http.*.extraheader, a password or token in a URL or a setting): refuse (stop at the start, naming the key) or allow (run with it in every call's reach: a call's own git reads that configuration)"`
	ConfineGitPass             []string         `key:"confine_git_pass" help:"Settings of the user's git configuration (~/.gitconfig, the system's) a confined call's own git gets besides the identity and the settings peal passes by default: keys, or section.* (e.g. alias.*; comma separated); a credential never passes"`
	ConfineEnvPass             []string         `key:"confine_env_pass" help:"Variables a confined call gets besides the basics, peal's own and its agent kind's: names, or PREFIX_* (comma separated)"`
	ConfineKeyProxy            KeyProxy         `key:"confine_key_proxy" enum:"@confine_key_proxy" default:"auto" help:"Keep the agents' model keys out of confined calls: each call talks to its model API through an endpoint of peal's, which adds the key, with a placeholder in its place: auto (wherever the kind and its login allow, said at the start), on (refuse to start where they do not), off (calls get the key, as they inherit it)"`
	ConfineTCP                 TCPRule          `key:"confine_tcp" enum:"@confine_tcp" default:"proxy" help:"What TCP connections a confined call may open where the kernel has TCP rules: proxy (to peal's proxy only, and to the loopback ports of its base URLs and confine_network_allow) or any (no TCP rule: test suites that connect to servers they start on ports the system picks need it)"`
	ConfineNetworkAllow        []string         `key:"confine_network_allow" help:"Hosts a confined call may reach through peal's proxy besides its agent kind's API hosts and base URLs: host, host:port or *.domain (e.g. proxy.golang.org; comma separated)"`
	ConfineNetworkNamespace    bool             `key:"confine_network_namespace" default:"true" help:"Give each confined call a network namespace of its own (loopback only, peal's proxy inside); false runs calls on this machine's network, kept to their proxy by seccomp and peal's supervisor of connections (weaker: the start line says so); under confine = on, a machine that refuses the namespace refuses the run unless false"`
	ConfineUnixSockets         []string         `key:"confine_unix_sockets" help:"UNIX sockets (or folders of them) of other programs a confined call may connect to (it connects to those it made), where peal decides the calls' connections (full paths, ~ for the home folder; comma separated)"`
	EscalationEnabled          bool             `key:"escalation.enabled" flag:"escalation" default:"false" help:"Escalate models on retried tickets and skip exhausted ones"`
	EscalationMaxRetries       uint32           `key:"escalation.max_retries" wasflag:"max-retries" default:"3" help:"Blocked attempts after which a ticket is skipped"`
	EscalationFixer            string           `key:"escalation.fixer" placeholder:"MODEL" help:"Model of address calls from attempt 2 (unset: the base model)"`
	EscalationSecondOpinion    string           `key:"escalation.reviewer_second_opinion" placeholder:"MODEL" help:"Model of triage calls from attempt 3 (unset: the base model)"`
	EscalationWorker           string           `key:"escalation.worker" placeholder:"MODEL" help:"Model of plan and execute calls from attempt 3 (unset: the base model)"`

	// ConfigPath is the TOML file read, "" when none.
	ConfigPath string
	// Task and FromTask come from --task and --from-task only.
	Task, FromTask *uint32
	// RetryReset comes from --retry-reset only: back up the retry state of
	// this run's tickets before it starts.
	RetryReset bool
	// AgentPath is agent_cmd resolved to an executable by Validate, and
	// FallbackPath fallback_agent_cmd ("" when unset).
	AgentPath, FallbackPath string
	// Sources tells, for every key, the layer its value came from.
	Sources map[string]Source
	// Warnings are problems that do not stop the run (an unreadable
	// ticketflow settings file), for the caller to log; Notes what the
	// validation decided that a person would want to know (the state folder
	// found from the repository).
	Warnings, Notes []string
	// ReadOnly is set by the commands that only read a plan's state
	// (status, report, the dry run): where the state lives never stops
	// them; they read it where it is and say so (see findStateDir).
	ReadOnly bool
	// TicketStore is the retry-state store of the state folder a ticket's
	// previous run kept its state in, when this run of the ticket has a
	// state folder of its own (see findStateDir and ResolveStore).
	TicketStore string
	// StateNotes is the folder, in the repository's git folder, where runs
	// note where each plan's state lives (see findStateDir); "" when the
	// repository's git folder is not known.
	StateNotes string
}

// Inputs are the raw layers handed to Load.
type Inputs struct {
	// Flags maps key names to the values of the flags actually given: the
	// text, parsed as a variable's would be, or a value Key.ParseText returned.
	Flags map[string]any
	// Env is the process environment in os.Environ form.
	Env []string
	// ConfigPath is the --config argument ("" when not given).
	ConfigPath string
	// OldFlags are the old names of flags given on the command line
	// (Key.OldFlag), each warned of once.
	OldFlags []string
	// DefaultRepo stands in for repo_path when no layer sets it (the
	// retry-state commands: the working folder), for the ticketflow settings
	// and the store; "" leaves repo_path unset.
	DefaultRepo string
}

// layer is one source of values, already parsed into the keys' types.
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
		if file.values, err = loadFile(in.ConfigPath); err != nil {
			return nil, err
		}
	}
	defaults := layer{source: SourceDefault, values: map[string]any{}}
	if in.DefaultRepo != "" {
		defaults.values["repo_path"] = in.DefaultRepo
	}
	tf, warnings := tfSettingsLayer(repoFrom(flags, env, file, defaults))
	for _, k := range Keys {
		if k.Default != nil {
			defaults.values[k.Name] = k.Default
		}
	}
	cfg := &Config{ConfigPath: in.ConfigPath, Sources: map[string]Source{}, Warnings: append(warnings, unknownVariables(in.Env)...)}
	cfg.Warnings = append(cfg.Warnings, oldFlags(in.OldFlags)...)
	rv := reflect.ValueOf(cfg).Elem()
	for _, k := range Keys {
		cfg.Sources[k.Name] = SourceDefault // unset keys are default too
		for _, l := range []layer{flags, env, file, tf, defaults} {
			if v, ok := l.values[k.Name]; ok {
				setField(rv.FieldByName(k.Field), v)
				cfg.Sources[k.Name] = l.source
				break
			}
		}
	}
	if err := cfg.applyPealLog(in.Env); err != nil {
		return nil, err
	}
	cfg.resolveParallel()
	cfg.resolveAgentCmd()
	if cfg.RunSummaryPath == "" {
		cfg.RunSummaryPath = filepath.Join(cfg.StateDir, state.SummaryName)
		cfg.Sources["run_summary_path"] = SourceDefault
	}
	return cfg, nil
}

// oldFlags are the warnings for the old flag names given: each once,
// naming the flag that replaced it.
func oldFlags(given []string) []string {
	var out []string
	for _, k := range Keys {
		if k.OldFlag != "" && slices.Contains(given, k.OldFlag) {
			out = append(out, fmt.Sprintf("--%s is the old name of --%s (%s, %s): it still works; use --%s", k.OldFlag, k.Flag, k.Name, k.Env(), k.Flag))
		}
	}
	return out
}

// pealLogEnv is the variable Peal read its log filter from, above every
// layer, --log-level included.
const pealLogEnv = "PEAL_LOG"

// applyPealLog lets PEAL_LOG, when set, decide log_level over every layer,
// as it did in Peal, so that a job written for Peal keeps its logs.
func (c *Config) applyPealLog(environ []string) error {
	raw := ""
	for _, kv := range environ {
		if name, value, ok := strings.Cut(kv, "="); ok && name == pealLogEnv {
			raw = value
		}
	}
	if raw == "" {
		return nil
	}
	level, err := parseLogLevel(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", pealLogEnv, err)
	}
	c.LogLevel, c.Sources["log_level"] = level, SourceEnv
	return nil
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

// NetworkBudget is the retry budget of network failures, shared by agent
// calls and stet's review commands: network_retry_count retries, waits from
// network_retry_delay_sec doubling up to network_retry_max_delay_sec, and
// none begun after network_give_up_sec of failing.
func (c *Config) NetworkBudget() phase.Budget {
	return phase.NetworkBudget(int(c.NetworkRetryCount), time.Duration(c.NetworkRetryDelaySec)*time.Second,
		time.Duration(c.NetworkRetryMaxDelaySec)*time.Second, time.Duration(c.NetworkGiveUpSec)*time.Second)
}

// Ticket is the ticket of a task whose part of the ticket id is part
// (state.State.Ticket: it stays the task's when the task moves): the run's
// ticket (ticket_id), else ticket_prefix and part.
func (c *Config) Ticket(part string) string {
	if c.TicketID != "" {
		return c.TicketID
	}
	return c.TicketPrefix + "-" + part
}

// Structured reports whether agent calls ask for the CLI's event stream:
// structured_output, or agent_session = "task", whose session ids some CLIs
// tell only there (and whose calls' usage is counted there).
func (c *Config) Structured() bool { return c.StructuredOutput || c.AgentSession == SessionTask }

// FallbackKind is the kind of the fallback agent: fallback_agent_kind, or
// agent_kind when it is unset.
func (c *Config) FallbackKind() string {
	if c.FallbackAgentKind != "" {
		return c.FallbackAgentKind
	}
	return c.AgentKind
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

// resolveParallel applies the rules of parallel and max_parallel:
// max_parallel = 0 forces parallel off; otherwise an explicit parallel wins;
// otherwise a max_parallel set by a layer turns it on.
func (c *Config) resolveParallel() {
	switch {
	case c.MaxParallel == 0:
		c.Parallel = false
	case c.Sources["parallel"] != SourceDefault:
	case c.Sources["max_parallel"] != SourceDefault:
		c.Parallel = true
	}
}

func flagLayer(given map[string]any) (layer, error) {
	l := layer{source: SourceFlag, values: map[string]any{}}
	names := make([]string, 0, len(given))
	for name := range given {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		k, ok := KeyByName(name)
		if !ok || k.Flag == "" {
			return l, fmt.Errorf("internal error: flag for unknown key %q", name)
		}
		v, err := k.fromFlag(given[name])
		if err != nil {
			return l, fmt.Errorf("%s: %w", k.FlagName(), err)
		}
		l.values[name] = v
	}
	return l, nil
}

// fromFlag takes a flag's value: text is parsed as a variable's would be; a
// value of the key's Go type (as ParseText returns it) is taken as it is.
func (k Key) fromFlag(v any) (any, error) {
	if text, ok := v.(string); ok {
		return parseText(k, text)
	}
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || rv.Type() != k.GoType {
		return nil, fmt.Errorf("internal error: a %T for a %s key", v, k.TypeName())
	}
	return canonical(rv), nil
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
		v, err := parseText(k, raw)
		if err != nil {
			return l, fmt.Errorf("%s: %w", k.Env(), err)
		}
		l.values[k.Name] = v
	}
	return l, nil
}

// maxConfigFile caps what is read of a configuration file: a special file
// (a named pipe, /dev/zero) is refused rather than waited on or read forever.
const maxConfigFile = 4 << 20

// loadFile reads a TOML config file strictly: a syntax error gives the line,
// an unknown key or a wrong type names the key.
func loadFile(path string) (map[string]any, error) {
	data, err := safefs.ReadFile(path, maxConfigFile)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, safefs.Reason(err))
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
			return unknownKey(path, full)
		}
		parsed, err := parseTOML(k, v)
		if err != nil {
			return fmt.Errorf("config file %s: key %s: %w", path, full, err)
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

// setField stores a parsed value (a string, bool, uint64, []string or
// []DismissPattern) into a Config field of the key's Go type.
func setField(f reflect.Value, v any) {
	if f.Kind() == reflect.Pointer {
		p := reflect.New(f.Type().Elem())
		setField(p.Elem(), v)
		f.Set(p)
		return
	}
	switch f.Kind() {
	case reflect.String: // a string, or an enum's own type
		f.SetString(v.(string))
	case reflect.Uint32, reflect.Uint64:
		f.SetUint(v.(uint64))
	case reflect.Float64:
		f.SetFloat(v.(float64))
	default:
		f.Set(reflect.ValueOf(v))
	}
}

// canonical is the parsed form of a field's value: pointers followed (nil
// when unset) and numbers as uint64.
func canonical(f reflect.Value) any {
	if f.Kind() == reflect.Pointer {
		if f.IsNil() {
			return nil
		}
		f = f.Elem()
	}
	switch f.Kind() {
	case reflect.Uint32, reflect.Uint64:
		return f.Uint()
	case reflect.String: // an enum's own type reads as its text
		return f.String()
	}
	return f.Interface()
}

// Value is the resolved value of a key in its TOML type: a string, bool,
// uint64, []string or []DismissPattern; nil when unset.
func (c *Config) Value(name string) any {
	k, ok := KeyByName(name)
	if !ok {
		return nil
	}
	v := canonical(reflect.ValueOf(c).Elem().FieldByName(k.Field))
	if s, ok := v.(string); ok && s == "" {
		return nil
	}
	return v
}
