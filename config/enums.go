package config

// The enumerated settings: each one's values are declared once here, as
// typed constants and one list in the order help and the documentation show
// them. The list is what validation accepts and names in its message (the
// key's `enum:"@name"` tag, through enumLists); code that acts on a setting
// compares it with these constants.

// IsolationMode is parallel_isolation: where the tasks of a parallel block work.
type IsolationMode string

const (
	IsolationWorktree IsolationMode = "worktree"
	IsolationShared   IsolationMode = "shared"
)

// IsolationModes are parallel_isolation's values.
var IsolationModes = []IsolationMode{IsolationWorktree, IsolationShared}

// ConflictAction is parallel_conflict: what a task whose merge-back conflicts does.
type ConflictAction string

const (
	ConflictRetry ConflictAction = "retry"
	ConflictFail  ConflictAction = "fail"
)

// ConflictActions are parallel_conflict's values.
var ConflictActions = []ConflictAction{ConflictRetry, ConflictFail}

// FindingsAction is on_findings_remaining: what a task left with findings or
// failing checks after the last round does.
type FindingsAction string

const (
	FindingsFail  FindingsAction = "fail"
	FindingsWarn  FindingsAction = "warn"
	FindingsDefer FindingsAction = "defer"
)

// FindingsActions are on_findings_remaining's values.
var FindingsActions = []FindingsAction{FindingsFail, FindingsWarn, FindingsDefer}

// StetFailAction is on_stet_fail: what a failed stet call does.
type StetFailAction string

const (
	StetFail      StetFailAction = "fail"
	StetRetryOnce StetFailAction = "retry_once"
	StetSkip      StetFailAction = "skip"
)

// StetFailActions are on_stet_fail's values.
var StetFailActions = []StetFailAction{StetFail, StetRetryOnce, StetSkip}

// LogFormat is log_format: the form of the log on stderr.
type LogFormat string

const (
	LogAuto   LogFormat = "auto"
	LogHuman  LogFormat = "human"
	LogLogfmt LogFormat = "logfmt"
	LogJSON   LogFormat = "json"
)

// LogFormats are log_format's values.
var LogFormats = []LogFormat{LogAuto, LogHuman, LogLogfmt, LogJSON}

// StepSummary is report_step_summary: whether peal report appends its
// summary to $GITHUB_STEP_SUMMARY.
type StepSummary string

const (
	StepSummaryAuto  StepSummary = "auto"
	StepSummaryTrue  StepSummary = "true"
	StepSummaryFalse StepSummary = "false"
)

// StepSummaries are report_step_summary's values.
var StepSummaries = []StepSummary{StepSummaryAuto, StepSummaryTrue, StepSummaryFalse}

// SessionMode is agent_session: how a task's agent calls share a conversation.
type SessionMode string

const (
	SessionFresh SessionMode = "fresh"
	SessionTask  SessionMode = "task"
)

// SessionModes are agent_session's values.
var SessionModes = []SessionMode{SessionFresh, SessionTask}

// ConfineMode is confine: whether calls are confined by the kernel.
type ConfineMode string

const (
	ConfineAuto ConfineMode = "auto"
	ConfineOn   ConfineMode = "on"
	ConfineOff  ConfineMode = "off"
)

// ConfineModes are confine's values.
var ConfineModes = []ConfineMode{ConfineAuto, ConfineOn, ConfineOff}

// GitCredentials is confine_git_credentials: what a confined run does when
// the git configuration its calls read holds a credential.
type GitCredentials string

const (
	GitCredentialsRefuse GitCredentials = "refuse"
	GitCredentialsAllow  GitCredentials = "allow"
)

// GitCredentialsActions are confine_git_credentials's values.
var GitCredentialsActions = []GitCredentials{GitCredentialsRefuse, GitCredentialsAllow}

// TCPRule is confine_tcp: what TCP connections a confined call may open.
type TCPRule string

const (
	TCPProxy TCPRule = "proxy"
	TCPAny   TCPRule = "any"
)

// TCPRules are confine_tcp's values.
var TCPRules = []TCPRule{TCPProxy, TCPAny}

// KeyProxy is confine_key_proxy: whether peal's model endpoint holds the
// agents' model keys instead of their calls.
type KeyProxy string

const (
	KeyProxyAuto KeyProxy = "auto"
	KeyProxyOn   KeyProxy = "on"
	KeyProxyOff  KeyProxy = "off"
)

// KeyProxies are confine_key_proxy's values.
var KeyProxies = []KeyProxy{KeyProxyAuto, KeyProxyOn, KeyProxyOff}

// valueNames are an enum's values as text.
func valueNames[T ~string](values []T) func() []string {
	return func() []string {
		out := make([]string, len(values))
		for i, v := range values {
			out[i] = string(v)
		}
		return out
	}
}
