package agent

import (
	"errors"
	"fmt"
	"peal/phase"
	"regexp"
	"strconv"
	"strings"
)

// The refusals that no wait can lift: a model the API does not know
// (UnknownModelError, in classify.go), an account out of quota or credit,
// and a prompt larger than the model's context window. Each is fatal for the
// attempt, carries the CLI's own words, and says what to do; the caller
// decides whether another agent may take the call over.

// QuotaError: the account behind the CLI is out of quota or credit (OpenAI's
// insufficient_quota, Anthropic's credit balance, Google's quota that names
// billing or a daily limit, in the CLI's words). No retry and no wait brings
// it back, and every later call of the run would be refused the same way.
type QuotaError struct {
	Kind string // the CLI that said so
	Said string // its words, quoted
	Hint string // what to do; "" for the generic advice
	Err  error  // the attempt's failure
}

func (e *QuotaError) Error() string {
	hint := e.Hint
	if hint == "" {
		hint = "add credit or raise the quota of the account the CLI uses"
	}
	return fmt.Sprintf("the account the %s CLI uses is out of quota or credit, which no wait brings back: %s, or set a fallback agent of another provider (fallback_agent_kind); %s says: %s",
		e.Kind, hint, e.Kind, e.Said)
}

func (e *QuotaError) Unwrap() error { return e.Err }

// EndsRun: every later call of the run would meet the same refusal.
func (e *QuotaError) EndsRun() bool { return true }

// ContextWindowError: the prompt of a call is larger than the context window
// of the model it asked for, as the CLI reports it. Sending the same request
// again would fail the same way, so the call is not retried; another model
// (a fallback agent's) may take it. Only a changed request can do better:
// should a call ever continue an earlier conversation of the agent, starting
// a fresh one is such a change, and this error is how the caller tells the
// case apart (errors.As) to try that once.
type ContextWindowError struct {
	Kind  string
	Phase phase.Name
	// Tokens and Limit are the prompt's size and the model's window, in
	// tokens, as the CLI or the API says; 0 when it does not.
	Tokens, Limit int
	Said          string // the CLI's words, quoted
	Err           error  // the attempt's failure
}

func (e *ContextWindowError) Error() string {
	size := "the CLI does not say by how much"
	switch {
	case e.Tokens > 0 && e.Limit > 0:
		size = fmt.Sprintf("about %d tokens, where the model takes at most %d", e.Tokens, e.Limit)
	case e.Limit > 0:
		size = fmt.Sprintf("the model takes at most %d tokens", e.Limit)
	}
	return fmt.Sprintf("the %s prompt is larger than the model's context window (%s), so it was not sent again: shorten what it carries (the task, the plan, the review's findings) or choose a model with a larger window (model, fallback_model); %s says: %s",
		e.Phase, size, e.Kind, e.Said)
}

func (e *ContextWindowError) Unwrap() error { return e.Err }

// SaysItsCause reports whether err, a failed call's, names its own cause:
// an account out of quota or credit, a prompt over the context window, a
// model that does not exist, a CLI that cannot log in. Nothing else (a
// connection refused on the side) is to be blamed for it.
func SaysItsCause(err error) bool {
	var auth *AuthError
	var unreachable *UnreachableHostError
	return advised(err) || errors.As(err, &auth) || errors.As(err, &unreachable)
}

// advised reports whether err carries its own advice, so that the kind's
// fatal hint (how to log in) is not added to it.
func advised(err error) bool {
	var unknown *UnknownModelError
	var quota *QuotaError
	var window *ContextWindowError
	return errors.As(err, &unknown) || errors.As(err, &quota) || errors.As(err, &window)
}

// contextSizes are the prompt's size and the window's in the words of the
// CLIs and APIs that say them; the quoted line first, then the whole
// output. 0 when none is said.
var contextSizeForms = []struct {
	re            *regexp.Regexp
	tokens, limit int // submatch indexes
}{
	// Claude Code: "the request is ~212345 tokens (limit 200000)".
	{regexp.MustCompile(`~?([\d,]+) tokens \(limit ([\d,]+)\)`), 1, 2},
	// Anthropic: "prompt is too long: 212345 tokens > 200000 maximum".
	{regexp.MustCompile(`([\d,]+) tokens > ([\d,]+) maximum`), 1, 2},
	// Anthropic: "input length and `max_tokens` exceed context limit: 1 + 2 > 3".
	{regexp.MustCompile(`exceed context limit: ([\d,]+) \+ [\d,]+ > ([\d,]+)`), 1, 2},
	// OpenAI: "maximum context length is 128000 tokens. However, your
	// messages resulted in 212345 tokens."
	{regexp.MustCompile(`maximum context length is ([\d,]+) tokens.*?resulted in ([\d,]+) tokens`), 2, 1},
	// Google: "The input token count (1212345) exceeds the maximum number
	// of tokens allowed (1048576)."
	{regexp.MustCompile(`input token count \(([\d,]+)\) exceeds the maximum number of tokens allowed \(([\d,]+)\)`), 1, 2},
}

func contextSizes(texts ...string) (tokens, limit int) {
	number := func(s string) int {
		n, _ := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
		return n
	}
	for _, text := range texts {
		for _, f := range contextSizeForms {
			if m := f.re.FindStringSubmatch(text); m != nil {
				return number(m[f.tokens]), number(m[f.limit])
			}
		}
	}
	return 0, 0
}

// ProviderOf is whose API, and so whose account, a call of kind k asking for
// model uses: the kind's own (Kind.Provider), or for a CLI that serves
// several providers, the provider part of the model ("anthropic/claude-…"
// for opencode); "" when that cannot be told (no model set).
func (k *Kind) ProviderOf(model string) string {
	if k.Provider != "" {
		return k.Provider
	}
	if p, _, ok := strings.Cut(model, "/"); ok {
		return p
	}
	return ""
}

// SameProvider reports whether two agents, each a kind and the model it
// asks for, are known to draw on the same provider's account: an account
// out of quota for one is out of quota for the other.
func SameProvider(kindA, modelA, kindB, modelB string) bool {
	a, errA := Lookup(kindA)
	b, errB := Lookup(kindB)
	if errA != nil || errB != nil {
		return false
	}
	pa, pb := a.ProviderOf(modelA), b.ProviderOf(modelB)
	return pa != "" && pa == pb
}
