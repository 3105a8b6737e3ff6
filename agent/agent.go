// Package agent owns what differs between the coding-agent CLIs peal can
// drive. Each kind is one registration, in a file of its own: the CLI's
// name and binary, the argv of read-only and writing calls, how the prompt
// is delivered, the environment that caps the CLI's own retries, its failure
// messages and exit codes, its structured output, how it tells whether it
// is logged in, which of its logins peal's model endpoint can hold (and the
// model APIs, declared once: api.go), and what docs/agents.md says of it.
// The rest of peal sees a Kind: the kinds the configuration accepts
// (agent_kind, fallback_agent_kind) and the per-kind tables of
// docs/agents.md are derived from the registry (Names, Lookup), and tests
// that cover every kind range over it.
package agent

import (
	"fmt"
	"peal/phase"
	"slices"
	"sort"
	"strings"
	"time"
)

// Mode is what a call may do to the repository.
type Mode int

const (
	// ReadOnly calls (plan, normalize, triage) answer with text.
	ReadOnly Mode = iota
	// Write calls (execute, address) edit the repository and run commands
	// (tests, builds) unattended.
	Write
)

// ModeOf is the mode of a call of the given phase.
func ModeOf(phaseName phase.Name) Mode {
	if phaseName == phase.Execute || phaseName == phase.Address {
		return Write
	}
	return ReadOnly
}

// Call is what one agent call asks for.
type Call struct {
	Phase      phase.Name // plan, normalize, triage, execute, address
	Repo       string     // the repository: working folder and workspace
	Model      string     // "" for the CLI's default
	Prompt     string
	Structured bool // ask for the CLI's event stream instead of plain text
	// Session, when set, is the id of the agent session the call begins
	// (a kind whose ids peal chooses) or, with Resume, continues (see
	// Kind.Session).
	Session string
	Resume  bool
	Options Options
	// Extra are arguments the user adds to every call (agent_extra_args),
	// after the kind's own and before the prompt.
	Extra []string
}

// Options are the configuration knobs that change a kind's argv.
type Options struct {
	Sandbox string // cursor: value of --sandbox on calls that are not plan calls
	Trust   bool   // cursor: --trust on every call
	Force   bool   // cursor: --force on writing calls
}

// Invocation is how to start one call.
type Invocation struct {
	Argv []string // program first
	// Stdin carries the prompt when the kind reads it there; nil means
	// standard input is /dev/null and the prompt is the last argument.
	Stdin []byte
	Env   []string // added to the call's environment
}

// PromptInArgv reports whether the prompt is the last argument.
func (inv Invocation) PromptInArgv() bool { return inv.Stdin == nil }

// Kind is one coding-agent CLI.
type Kind struct {
	Name       string
	CLI        string // the CLI's own name, as docs/agents.md writes it
	DefaultCmd string // the binary's usual name, looked up on PATH
	// Args are the kind's own arguments of a call, after the program;
	// Invocation appends the model, the user's extra arguments and the
	// prompt (or StdinArg) after them.
	Args func(c Call) []string
	// ModelFlag is the option that names the model ("--model", "-m").
	ModelFlag string
	// Provider is whose API the CLI calls, and so whose account its quota
	// is ("anthropic", "openai", "google"); "" for a CLI that serves
	// several, whose model names the provider (see ProviderOf).
	Provider      string
	PromptOnStdin bool
	// StdinArg, when set, is the last argument of every call: the one that
	// tells the CLI to read its prompt on stdin (codex's "-").
	StdinArg string
	// Env is added to every call: it caps the CLI's own retries, so that
	// peal's budgets govern.
	Env []string
	// Failures are the kind's own failure messages and exit codes.
	Failures Failures
	// Events reads the structured output; nil when the kind has none.
	Events *Events
	// Session is how the CLI continues a conversation over several calls;
	// nil when it cannot.
	Session *Session
	// Auth is how to tell, before the first call, whether the CLI can
	// authenticate.
	Auth Auth
	// ShowsWork: the CLI prints its work as it goes (its tool calls, the
	// commands it runs) even without structured output, so an attempt that
	// ends on a rate limit after showing nothing more spent that silence
	// on the CLI's own retries of the limit (opencode retries silently).
	ShowsWork bool
	// LaunchGap, when set, staggers parallel launches: while a call of this
	// CLI runs, the next one starts no sooner than this after the last
	// launch (the CLI races on its own files at start-up).
	LaunchGap time.Duration
	// VersionArgs print the CLI's version.
	VersionArgs []string
	// Notes say what the flags of writing calls grant: the dry run shows
	// them, and so does docs/agents.md.
	Notes string
	// Confine is what its calls need when they are confined.
	Confine Confinement
	// Doc is what docs/agents.md says of the CLI beyond what the fields
	// above tell: how the real CLI was measured to behave.
	Doc Doc
}

// Doc holds the cells of docs/agents.md's per-kind tables that are
// measurements of the real CLI rather than peal's own declarations, in
// Markdown. docs/agents.md is generated from them (see TestDocumented).
type Doc struct {
	Measured string // the version of the CLI the measurements are of
	// How the CLI shows each failure, and the class peal gives it.
	NoCredentials, Unreachable, InvalidKey, RateLimit string
	// How it shows an API answering 401, 403, and 404 for a model it
	// does not know.
	Unauthorized, Forbidden, ModelNotFound string
	// One attempt against a refused connection, what bounds it, how many
	// attempts peal makes at its default settings, and when it exits 4.
	Outage, OutageBound, OutageAttempts, OutageExit string
	// How it shows an account out of quota or credit, and a prompt larger
	// than the model's context window.
	OutOfQuota, OverContext string
	// What it does by itself against a 429 or a 529 that never lifts,
	// where it shows the server's time to retry, and when peal stops with
	// exit 4 under rate_limit_max_wait_sec = 40.
	OwnRetries, RetryTime, CapExit string
}

// MaxArgLen is the longest single argument Linux accepts (MAX_ARG_STRLEN,
// 32 pages, the terminating NUL included).
const MaxArgLen = 128<<10 - 1

// PromptTooLongError: the prompt cannot be an argument of the CLI.
type PromptTooLongError struct {
	Kind  string
	Phase phase.Name
	Len   int
}

func (e *PromptTooLongError) Error() string {
	return fmt.Sprintf("the %s prompt is %d bytes, longer than one command-line argument may be (%d bytes), and the %s CLI only takes its prompt as an argument: shorten the task, plan or review, or use an agent_kind that reads the prompt on stdin",
		e.Phase, e.Len, MaxArgLen, e.Kind)
}

// Invocation is the argv, stdin and environment of call c with the binary at
// path. The argv is, in this order: the program, the kind's own arguments
// (Args), the session's (Session.Args) when the call begins or continues
// one, ModelFlag and the model when one is set, the user's extra arguments
// (agent_extra_args), and last the prompt, or StdinArg when the prompt goes
// on stdin. A prompt that the kind takes as an argument and that is longer
// than an argument may be, or a session id the CLI could misread, is an
// error before anything runs.
func (k *Kind) Invocation(path string, c Call) (Invocation, error) {
	if c.Session != "" && !k.Session.ValidID(c.Session) {
		return Invocation{}, fmt.Errorf("the %s CLI cannot be given the session id %q: it is not one the CLI gives or takes", k.Name, c.Session)
	}
	return k.invocation(path, c)
}

// invocation is Invocation once the session id is known to be valid.
func (k *Kind) invocation(path string, c Call) (Invocation, error) {
	// A NUL byte (from an agent's plan text or a review's output) cannot be
	// passed in an argument and means nothing to a model: it is shown as
	// U+FFFD, so that the call can be made at all.
	c.Prompt = strings.ReplaceAll(c.Prompt, "\x00", "\uFFFD")
	argv := append([]string{path}, k.Args(c)...)
	argv = append(argv, k.Session.Args(c.Session, c.Resume)...)
	if c.Model != "" {
		argv = append(argv, k.ModelFlag, c.Model)
	}
	argv = append(argv, c.Extra...)
	inv := Invocation{Argv: argv, Env: slices.Clone(k.Env)}
	if k.PromptOnStdin {
		if k.StdinArg != "" {
			inv.Argv = append(inv.Argv, k.StdinArg)
		}
		inv.Stdin = []byte(c.Prompt)
		return inv, nil
	}
	if len(c.Prompt) > MaxArgLen {
		return Invocation{}, &PromptTooLongError{Kind: k.Name, Phase: c.Phase, Len: len(c.Prompt)}
	}
	inv.Argv = append(inv.Argv, c.Prompt)
	return inv, nil
}

var kinds = map[string]*Kind{}

// register adds a kind; each kind's file calls it from init.
func register(k *Kind) {
	if _, dup := kinds[k.Name]; dup {
		panic("agent kind registered twice: " + k.Name)
	}
	kinds[k.Name] = k
}

// Default is the kind used when agent_kind is not set.
const Default = "cursor"

// Lookup returns the kind named name.
func Lookup(name string) (*Kind, error) {
	if k, ok := kinds[name]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("unknown agent kind %q: want one of %s", name, strings.Join(Names(), ", "))
}

// Names lists every kind, sorted.
func Names() []string {
	names := make([]string, 0, len(kinds))
	for n := range kinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
