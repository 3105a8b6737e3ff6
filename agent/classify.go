package agent

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"peal/internal/text"
	"peal/phase"
)

// Failures are the messages and exit codes by which a kind's failures are
// told apart. Patterns are case-insensitive substrings of one line of
// output, colour codes stripped.
type Failures struct {
	Fatal []string // no retry can heal it: not logged in, invalid key, refusals, usage errors
	// ModelNotFound are the CLI's words for a model its API does not know
	// (HTTP 404): fatal for that model (*UnknownModelError).
	ModelNotFound []string
	// OutOfQuota are the CLI's words for an account out of quota or credit:
	// no wait brings it back, so it is fatal for that account
	// (*QuotaError).
	OutOfQuota []string
	// Billing are words of a quota refusal that an API also sends for a
	// quota that resets within minutes (Google's "check your plan and
	// billing details", free tier or not): out of quota when the output
	// gives no time to retry, else a rate limit for that time.
	Billing []string
	// OverContext are the CLI's words for a prompt larger than the model's
	// context window: fatal for that call, since the same prompt would be
	// refused again (*ContextWindowError).
	OverContext []string
	// Blocking are messages after which the CLI waits for a person (a
	// browser login, a trust prompt) or does nothing: fatal, and they end
	// the call as soon as they are seen.
	Blocking  []string
	Network   []string // the model's API cannot be reached
	RateLimit []string // HTTP 429, usage limits, overloaded
	Transient []string // hiccups of the CLI itself, retried at once
	// ExitCodes decide the class of a non-zero exit by its code alone.
	ExitCodes map[int]phase.Class
	// QuoteFrom are words that start the quote of a line holding them:
	// what the CLI prints before them says nothing of the failure (gemini
	// prints the path of its error report first).
	QuoteFrom []string
	// Unquoted are the starts of lines that never explain a failure (after
	// leading blanks, case-insensitive): the CLI's footer (codex's "tokens
	// used" and its count), the fields of an error object it dumps
	// (gemini's "status: 400"). Neither they, nor a line without a letter
	// (a bare number, a brace), are quoted.
	Unquoted []string
	// FatalHint says how to fix a fatal failure (e.g. how to log in);
	// FatalHints replace it for the failures whose message contains their
	// key. A model that does not exist gets no hint here: the caller, who
	// knows which setting chose the model, names it.
	FatalHint  string
	FatalHints map[string]string
	// QuotaHint says what to do about an account out of quota or credit.
	QuotaHint string
}

// Common are the failure messages every kind shares: the spellings of
// network and HTTP trouble in Node, Go, Rust and curl-like clients.
var Common = Failures{
	Fatal: []string{
		"authentication required", "unauthorized", "invalid api key", "not logged in",
		// Google's answer to a wrong API key (HTTP 400), whichever CLI asked.
		"api key not valid",
	},
	// A model the API does not know (HTTP 404), in the words of the APIs
	// that CLIs relay: OpenAI's code and message, Anthropic's error type,
	// and Anthropic's message ("model: M") after a CLI's "Error:".
	ModelNotFound: []string{"model_not_found", "not_found_error", "does not exist or you do not have access to it", "error: model: "},
	// The APIs' words for an account out of quota or credit, whichever CLI
	// relays them: OpenAI's error type, Anthropic's credit balance, and
	// Google's quota of none at all ("limit: 0" for the model).
	OutOfQuota: []string{"insufficient_quota", "credit balance is too low", "limit: 0,"},
	// OpenAI's insufficient_quota and Google's RESOURCE_EXHAUSTED both say
	// so; Google sends it for its per-minute quotas too, with a time to
	// retry.
	Billing: []string{"check your plan and billing details"},
	// A prompt over the model's context window, in the APIs' words:
	// Anthropic's "prompt is too long: N tokens > L maximum" (and its
	// "input length and max_tokens exceed context limit"), OpenAI's code
	// and message, Google's input token count.
	OverContext: []string{"prompt is too long", "exceed context limit", "context_length_exceeded", "maximum context length is",
		"exceeds the context window", "exceeds the maximum number of tokens allowed"},
	Network: []string{
		"connection reset", "connection refused", "connection timed out", "network is unreachable",
		"econnreset", "econnrefused", "etimedout", "enotfound", "eai_again", "socket hang up",
		"could not resolve host", "temporary failure in name resolution", "no such host", "name does not resolve",
		"failed to lookup address", "tls handshake timeout", "timeout awaiting response", "request timed out",
		"fetch failed", "unable to connect", "failed to connect", "waiting for network", "stream disconnected",
		"502 bad gateway", "503 service unavailable", "504 gateway timeout",
		"status code 502", "status code 503", "status code 504", "http 502", "http 503", "http 504",
	},
	RateLimit: []string{
		"rate limit", "rate_limit", "too many requests", "status code 429", "http 429", "(429)", "429 too many",
		"usage limit", "quota exceeded", "resource_exhausted", "overloaded", "(529)", "529 overloaded",
	},
}

// usageErrors are how the CLIs' argument parsers reject an argv: most often
// a binary of another kind than agent_kind. Fatal.
var usageErrors = []string{"unknown option", "unexpected argument", "unknown arguments", "unrecognized option", "unrecognized arguments", "unrecognized subcommand"}

// UserPatterns are the patterns a user configured: they extend the kind's
// built-in ones, or replace them when Builtin is false.
type UserPatterns struct {
	Fatal, Network []string
	Builtin        bool
}

// Rules are the merged patterns of one kind and one configuration: made
// once (Kind.Rules) and shared by every call's classifier and watcher.
type Rules struct {
	kind                                        *Kind
	model                                       []string // the model does not exist
	quota, billing, context                     []string // no wait helps: out of quota, or a prompt too large
	fatal, login, network, rateLimit, transient []string
	unquoted                                    []string
	// refusals are the messages that, at the start of a line, make a call
	// that exited 0 a failure: the kind's own (not the common ones, which
	// a real answer may well contain) and the user's fatal patterns.
	refusals  []string
	exitCodes map[int]phase.Class
}

// Rules merges the kind's patterns with the user's, lower-cased.
func (k *Kind) Rules(u UserPatterns) *Rules {
	r := &Rules{kind: k, exitCodes: map[int]phase.Class{}}
	if u.Builtin {
		f := k.Failures
		r.model = concat(Common.ModelNotFound, f.ModelNotFound)
		r.quota = concat(Common.OutOfQuota, f.OutOfQuota)
		r.billing = concat(Common.Billing, f.Billing)
		r.context = concat(Common.OverContext, f.OverContext)
		r.unquoted = slices.Clone(f.Unquoted)
		r.fatal = concat(Common.Fatal, usageErrors, f.Fatal)
		r.login = slices.Clone(f.Blocking)
		r.network = concat(Common.Network, f.Network)
		r.rateLimit = concat(Common.RateLimit, f.RateLimit)
		r.transient = slices.Clone(f.Transient)
		for code, class := range f.ExitCodes {
			r.exitCodes[code] = class
		}
	}
	if u.Builtin {
		r.refusals = concat(k.Failures.Blocking, k.Failures.Fatal, k.Failures.OutOfQuota, k.Failures.RateLimit)
	}
	r.refusals = append(r.refusals, u.Fatal...)
	r.fatal = append(r.fatal, u.Fatal...)
	r.network = append(r.network, u.Network...)
	for _, list := range []*[]string{&r.model, &r.quota, &r.billing, &r.context, &r.unquoted, &r.fatal, &r.login, &r.network, &r.rateLimit, &r.transient, &r.refusals} {
		*list = lower(*list)
	}
	return r
}

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func lower(list []string) []string {
	out := list[:0]
	for _, p := range list {
		if p = strings.ToLower(strings.TrimSpace(p)); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// refusal names the failures that no wait can heal and that the caller
// tells apart from other fatal ones.
type refusal int

const (
	noRefusal    refusal = iota
	unknownModel         // the API does not know the model
	outOfQuota           // the account is out of quota or credit
	billing              // out of quota, unless the output gives a time to retry
	overContext          // the prompt is larger than the model's window
)

// match is a pattern found in a line of output.
type match struct {
	class   phase.Class
	line    string // quoted
	refusal refusal
}

// matchLine finds the class of one (cleaned) line: a model that does not
// exist, an account out of quota, a prompt too large, login and fatal
// first, then rate limit, transient and network. A line that names billing
// counts as a rate limit here: only the whole output tells whether it gives
// a time to retry.
func (r *Rules) matchLine(line string) (phase.Class, bool) {
	class, _, _, ok := r.matchPattern(line)
	return class, ok
}

// matchPattern is matchLine that also returns the pattern found, and which
// refusal it is.
func (r *Rules) matchPattern(line string) (class phase.Class, pattern string, kind refusal, ok bool) {
	l := strings.ToLower(line)
	for _, c := range []struct {
		class    phase.Class
		kind     refusal
		patterns []string
	}{
		{phase.Fatal, unknownModel, r.model}, {phase.Fatal, outOfQuota, r.quota}, {phase.Fatal, overContext, r.context},
		{phase.Fatal, noRefusal, r.login}, {phase.Fatal, noRefusal, r.fatal}, {phase.RateLimited, billing, r.billing},
		{phase.RateLimited, noRefusal, r.rateLimit}, {phase.Transient, noRefusal, r.transient}, {phase.Network, noRefusal, r.network},
	} {
		for _, p := range c.patterns {
			if strings.Contains(l, p) {
				return c.class, p, c.kind, true
			}
		}
	}
	return 0, "", noRefusal, false
}

// quoteFrom is line from the first of the kind's QuoteFrom words it holds,
// after an ellipsis; line itself when it holds none, or starts with one.
func (r *Rules) quoteFrom(line string) string {
	for _, w := range r.kind.Failures.QuoteFrom {
		if i := strings.Index(line, w); i > 0 {
			return "…" + line[i:]
		}
	}
	return line
}

// quoteMatch quotes a line so that the quote shows the pattern found in it:
// a long line whose match lies past the quote's cut (gemini prints the path
// of its error report before the API's answer) is quoted from a little
// before the match.
func quoteMatch(line, pattern string) string {
	q := text.Quote(line)
	if strings.Contains(strings.ToLower(q), pattern) {
		return q
	}
	flat := strings.Join(strings.Fields(text.Clean(line)), " ")
	lower := strings.ToLower(flat)
	i := strings.Index(lower, pattern)
	if i < 0 {
		return q
	}
	runes := []rune(flat)
	at := min(utf8.RuneCountInString(lower[:i]), len(runes))
	return text.Quote("…" + string(runes[max(at-60, 0):]))
}

// isBlocking reports whether a line says the CLI waits for a person: it
// begins with one of the kind's waiting messages.
func (r *Rules) isBlocking(line string) bool {
	l := lead(line)
	return slices.ContainsFunc(r.login, func(p string) bool { return strings.HasPrefix(l, p) })
}

// lead is a line as a message starts: lower case, without leading symbols
// (a warning sign, bullets, colour remains) and an "Error:" prefix. Digits
// stay: "2. Not logged in users…" is an item of an answer, not a message.
func lead(line string) string {
	l := strings.ToLower(strings.TrimLeftFunc(line, func(c rune) bool { return !unicode.IsLetter(c) && !unicode.IsDigit(c) }))
	for _, prefix := range []string{"error:", "fatal:", "warning:"} {
		l = strings.TrimSpace(strings.TrimPrefix(l, prefix))
	}
	return l
}

// tailBytes is how much of stdout is searched for failure messages: agents
// echo file contents, so only the end of their output speaks for the failure.
const tailBytes = 4 << 10

// refusalBytes: the stdout of a call that exited 0 is searched for a refusal
// only when it is this short. A refusal is a short message; a real answer
// that merely mentions the same words is longer.
const refusalBytes = 2 << 10

// findRefusal finds a line that starts with a refusal (after any symbols,
// list markers and an "Error:" prefix) and returns its class.
func (r *Rules) findRefusal(texts ...string) (match, bool) {
	for _, out := range texts {
		for _, line := range strings.Split(out, "\n") {
			line = text.Clean(line)
			l := lead(line)
			if !slices.ContainsFunc(r.refusals, func(p string) bool { return strings.HasPrefix(l, p) }) {
				continue
			}
			class, _, kind, ok := r.matchPattern(line)
			if !ok || (class != phase.Fatal && class != phase.RateLimited) {
				class, kind = phase.Fatal, noRefusal
			}
			if kind == billing {
				kind = noRefusal
			}
			return match{class: class, line: text.Quote(line), refusal: kind}, true
		}
	}
	return match{}, false
}

// find searches the output for the first line of the strongest class: stderr
// and the stdout tail, each line cleaned of colour codes. A model that does
// not exist wins over an account out of quota, that over a prompt too large,
// that over any other fatal failure, fatal over rate limit, rate limit over
// transient, transient over network. A line that names billing is out of
// quota when the output gives no time to retry (ResetWait), else a rate
// limit.
func (r *Rules) find(texts ...string) (match, bool) {
	best, found := match{}, false
	rank := func(m match) int {
		switch m.refusal {
		case unknownModel:
			return 7
		case outOfQuota:
			return 6
		case overContext:
			return 5
		}
		return map[phase.Class]int{phase.Fatal: 4, phase.RateLimited: 3, phase.Transient: 2, phase.Network: 1}[m.class]
	}
	retryTime := ResetWait(strings.Join(texts, "\n"), time.Now()) > 0
	for _, out := range texts {
		for _, line := range strings.Split(out, "\n") {
			line = text.Clean(line)
			class, pattern, kind, ok := r.matchPattern(line)
			if kind == billing {
				if kind = noRefusal; !retryTime {
					class, kind = phase.Fatal, outOfQuota
				}
			}
			m := match{class: class, line: quoteMatch(r.quoteFrom(line), pattern), refusal: kind}
			if ok && (!found || rank(m) > rank(best)) {
				best, found = m, true
			}
		}
	}
	return best, found
}

// quotable reports whether a line of output can explain a failure: it is
// meaningful, has a letter, and is none of the kind's unquoted lines.
func (r *Rules) quotable(line string) bool {
	if !text.Meaningful(line) || !strings.ContainsFunc(line, unicode.IsLetter) {
		return false
	}
	l := strings.ToLower(strings.TrimSpace(text.Clean(line)))
	return !slices.ContainsFunc(r.unquoted, func(p string) bool { return strings.HasPrefix(l, p) })
}

// explain is the line that best explains a failure no pattern matched: the
// last quotable line of stderr, else of the stdout tail; "" when none.
func (r *Rules) explain(res phase.Result) string {
	for _, out := range []string{res.Stderr, tail(res.Stdout, tailBytes)} {
		lines := strings.Split(out, "\n")
		for i := len(lines) - 1; i >= 0; i-- {
			if r.quotable(lines[i]) {
				return text.Quote(r.quoteFrom(text.Clean(lines[i])))
			}
		}
	}
	return ""
}

// firstMeaningful is the first line of s that can say something.
func firstMeaningful(s string) string {
	for _, line := range strings.Split(s, "\n") {
		if text.Meaningful(line) {
			return line
		}
	}
	return ""
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// hinted adds the kind's hint to a fatal failure's message.
type hinted struct {
	err  error
	hint string
}

func (h *hinted) Error() string { return h.err.Error() + " (" + h.hint + ")" }
func (h *hinted) Unwrap() error { return h.err }

// Classifier is the phase.Classifier of the kind's calls under these rules:
// failure (nil: timeout or non-zero exit) says whether an attempt that was
// not stopped by its watcher failed, reading the answer text (with
// structured output, the result event's text); w, when set, is the watcher
// of the attempt being classified. now is the clock used to turn a reset
// time into a wait.
func (r *Rules) Classifier(failure func(phase.Result) error, w func() *Watcher, now func() time.Time) phase.Classifier {
	k := r.kind
	if failure == nil {
		failure = phase.CheckExit
	}
	if now == nil {
		now = time.Now
	}
	return func(res phase.Result) phase.Verdict {
		var watch *Watcher
		if w != nil {
			watch = w()
		}
		v := r.classify(res, failure, watch, now)
		if v.Class == phase.Fatal && !advised(v.Err) {
			hint := k.Failures.FatalHint
			msg := strings.ToLower(v.Err.Error())
			for p, h := range k.Failures.FatalHints {
				if strings.Contains(msg, p) {
					hint = h
				}
			}
			if slices.ContainsFunc(usageErrors, func(p string) bool { return strings.Contains(msg, p) }) {
				hint = fmt.Sprintf("the CLI rejected the %s argv: check that agent_kind names the CLI that agent_cmd runs", k.Name)
			}
			if hint != "" {
				v.Err = &hinted{err: v.Err, hint: hint}
			}
		}
		return v
	}
}

func (r *Rules) classify(res phase.Result, failure func(phase.Result) error, w *Watcher, now func() time.Time) phase.Verdict {
	var ended *Ending
	if errors.As(res.Ended, &ended) && ended.Class != phase.Succeeded {
		if ended.Class == phase.RateLimited {
			// The CLI's own retries were cut short: what it said may show
			// that no wait helps (a quota refusal with no time to retry).
			if m, ok := r.find(res.Stderr, tail(res.Stdout, tailBytes)); ok && m.refusal != noRefusal {
				return r.matched(m, ended.Err, res, w, now)
			}
		}
		return r.verdict(ended.Class, ended.Err, res, w, now)
	}
	answer := res
	if w != nil {
		if text, ok := w.Answer(); ok {
			answer.Stdout = text
		}
		if ended != nil || w.Final() {
			// The result event came: the call succeeded whatever
			// happened to the lingering process afterwards.
			answer.ExitCode, answer.TimedOut = 0, false
		}
		if msg, isErr := w.Failed(); isErr {
			// The reported message itself first, then what the CLI printed.
			m, ok := r.find(msg)
			if !ok {
				m, ok = r.find(res.Stderr, tail(res.Stdout, tailBytes))
			}
			if !ok {
				return phase.Verdict{Class: phase.Ordinary, Err: fmt.Errorf("%s call reported an error: %s", res.Phase, text.Quote(msg))}
			}
			return r.matched(m, fmt.Errorf("%s call reported an error: %s", res.Phase, m.line), res, w, now)
		}
	}
	fail := failure(answer)
	if fail == nil {
		// A refusal that exits 0 is never a success. On stdout a refusal
		// stands instead of the answer: it is the first line of a short
		// output, while an answer may well mention the same words further on.
		texts := []string{tail(res.Stderr, tailBytes)}
		if out := strings.TrimSpace(text.Clean(answer.Stdout)); len(out) <= refusalBytes {
			texts = append(texts, firstMeaningful(out))
		}
		if m, ok := r.findRefusal(texts...); ok {
			return r.matched(m, fmt.Errorf("%s call exited 0 but did nothing: %s", res.Phase, m.line), res, w, now)
		}
		return phase.Verdict{Class: phase.Succeeded}
	}
	var exitErr *phase.ExitError
	if errors.As(fail, &exitErr) {
		if class, ok := r.exitCodes[res.ExitCode]; ok {
			if m, found := r.find(res.Stderr, tail(res.Stdout, tailBytes)); found {
				exitErr.Line = m.line
				if m.refusal != noRefusal {
					return r.matched(m, fail, res, w, now)
				}
			} else if line := r.explain(res); line != "" {
				exitErr.Line = line
			}
			return r.verdict(class, fail, res, w, now)
		}
	}
	if !res.TimedOut && res.ExitCode == 0 && !errors.As(fail, &exitErr) {
		// The process did its part; the answer was wrong (e.g. a plan
		// without tasks): an ordinary failure, whatever the output says.
		return phase.Verdict{Class: phase.Ordinary, Err: fail}
	}
	if m, ok := r.find(res.Stderr, tail(res.Stdout, tailBytes)); ok {
		quoteLine(fail, m.line)
		return r.matched(m, fail, res, w, now)
	}
	if line := r.explain(res); line != "" {
		// Not the CLI's footer or a bare number: its last words that say
		// something.
		quoteLine(fail, line)
	}
	return phase.Verdict{Class: phase.Ordinary, Err: fail}
}

// quoteLine makes the attempt's error quote the matched line.
func quoteLine(err error, line string) {
	var ee *phase.ExitError
	var te *phase.TimeoutError
	switch {
	case errors.As(err, &ee):
		ee.Line = line
	case errors.As(err, &te):
		te.Line = line
	}
}

// matched is the verdict of a failure whose output matched m: the failures
// no wait can heal are told apart, for the caller to say what to do and to
// hand the call to another agent: a model that does not exist
// (*UnknownModelError, for the caller to name the setting that chose it),
// an account out of quota (*QuotaError), a prompt larger than the model's
// window (*ContextWindowError).
func (r *Rules) matched(m match, err error, res phase.Result, w *Watcher, now func() time.Time) phase.Verdict {
	switch m.refusal {
	case unknownModel:
		err = &UnknownModelError{Kind: r.kind.Name, Said: m.line, Err: err}
	case outOfQuota:
		err = &QuotaError{Kind: r.kind.Name, Said: m.line, Hint: r.kind.Failures.QuotaHint, Err: err}
	case overContext:
		tokens, limit := contextSizes(m.line, res.Stderr+"\n"+tail(res.Stdout, tailBytes))
		err = &ContextWindowError{Kind: r.kind.Name, Phase: res.Phase, Tokens: tokens, Limit: limit, Said: m.line, Err: err}
	}
	return r.verdict(m.class, err, res, w, now)
}

// UnknownModelError: the CLI says its API does not know the model the call
// asked for (HTTP 404). No retry of that model can heal it; another model
// may do.
type UnknownModelError struct {
	Kind string // the CLI that said so
	Said string // its words, quoted
	Err  error  // the attempt's failure
}

func (e *UnknownModelError) Error() string { return e.Err.Error() }
func (e *UnknownModelError) Unwrap() error { return e.Err }

// verdict is a failure of class with its error. A rate limit learns when
// the limit resets: from the CLI's structured retry events, else from its
// words; and how long the attempt already spent on the CLI's own retries of
// it (Verdict.Waited), from the watcher.
func (r *Rules) verdict(class phase.Class, err error, res phase.Result, w *Watcher, now func() time.Time) phase.Verdict {
	v := phase.Verdict{Class: class, Err: err}
	if class == phase.RateLimited {
		t := now()
		if w != nil {
			v.Wait = w.ServerWait(t)
			v.Waited = w.RateLimited()
		}
		if v.Wait == 0 {
			v.Wait = ResetWait(res.Stderr+"\n"+tail(res.Stdout, tailBytes), t)
		}
	}
	return v
}

var (
	// "…|1767225600": a reset time as Unix seconds after a bar.
	resetEpoch = regexp.MustCompile(`\|(\d{10})\b`)
	// "try again in 5 minutes", "retry after 30s", "resets in 2h",
	// Google's "Please retry in 26.5s".
	resetIn = regexp.MustCompile(`(?i)(?:try again|retry|resets?)\s+(?:in|after)\s+(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?)\b`)
	// "resets at 2026-03-01T10:00:00Z".
	resetAt = regexp.MustCompile(`(?i)(?:try again|retry|resets?)\s+(?:at|after)\s+(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d))`)
	// Google's RetryInfo as a CLI prints the error's JSON: "retryDelay":"26s".
	resetDelay = regexp.MustCompile(`(?i)retryDelay['"]?\s*[:=]\s*['"]?(\d+(?:\.\d+)?)(ms|s)\b`)
	// A Retry-After header as a CLI prints the answer's headers
	// ("retry-after":"1", or retry-after-ms).
	resetHeader = regexp.MustCompile(`(?i)retry-after(-ms)?['"]?\s*[:=]\s*['"]?(\d+(?:\.\d+)?)`)
	// Claude Code's limits: "resets 2:16am (UTC)", "resets Nov 28, 2am
	// (Europe/Berlin)", "resets Jan 3, 2027, 2:30pm (UTC)": a clock time in
	// the zone named, today or tomorrow when no date is given.
	resetClock = regexp.MustCompile(`(?i)resets\s+(?:at\s+)?(?:([A-Z][a-z]{2}) (\d{1,2}),\s*(?:(\d{4}),\s*)?)?(\d{1,2})(?::(\d\d))?\s*(am|pm)\s*\(([^)]+)\)`)
)

// ResetWait reads, from an agent's output, how long until its rate limit
// resets or the server asks to be called again; 0 when it does not say. The
// latest mention wins.
func ResetWait(out string, now time.Time) time.Duration {
	best, at := time.Duration(0), -1
	take := func(pos int, d time.Duration) {
		if pos >= at {
			best, at = d, pos
		}
	}
	for _, m := range resetEpoch.FindAllStringSubmatchIndex(out, -1) {
		if sec, err := strconv.ParseInt(out[m[2]:m[3]], 10, 64); err == nil {
			take(m[0], time.Unix(sec, 0).Sub(now))
		}
	}
	for _, m := range resetAt.FindAllStringSubmatchIndex(out, -1) {
		if t, err := time.Parse(time.RFC3339, out[m[2]:m[3]]); err == nil {
			take(m[0], t.Sub(now))
		}
	}
	for _, m := range resetIn.FindAllStringSubmatchIndex(out, -1) {
		take(m[0], duration(out[m[2]:m[3]], out[m[4]:m[5]]))
	}
	for _, m := range resetDelay.FindAllStringSubmatchIndex(out, -1) {
		take(m[0], duration(out[m[2]:m[3]], out[m[4]:m[5]]))
	}
	for _, m := range resetHeader.FindAllStringSubmatchIndex(out, -1) {
		unit := "s"
		if m[2] >= 0 {
			unit = "ms"
		}
		take(m[0], duration(out[m[4]:m[5]], unit))
	}
	for _, m := range resetClock.FindAllStringSubmatch(out, -1) {
		if t, ok := clockTime(m, now); ok {
			take(strings.Index(out, m[0]), t.Sub(now))
		}
	}
	return max(best, 0)
}

// duration is n in unit (ms, s, m, h and their longer spellings).
func duration(n, unit string) time.Duration {
	f, _ := strconv.ParseFloat(n, 64)
	d := time.Second
	switch u := strings.ToLower(unit); {
	case strings.HasPrefix(u, "ms"), strings.HasPrefix(u, "milli"):
		d = time.Millisecond
	case strings.HasPrefix(u, "m"):
		d = time.Minute
	case strings.HasPrefix(u, "h"):
		d = time.Hour
	}
	return time.Duration(f * float64(d))
}

// clockTime is the time a resetClock match names: the next such clock time
// in its zone, on its date when it gives one.
func clockTime(m []string, now time.Time) (time.Time, bool) {
	loc, err := time.LoadLocation(m[7])
	if err != nil {
		return time.Time{}, false
	}
	hour, _ := strconv.Atoi(m[4])
	minute, _ := strconv.Atoi(m[5])
	if hour < 1 || hour > 12 || minute > 59 {
		return time.Time{}, false
	}
	hour %= 12
	if strings.EqualFold(m[6], "pm") {
		hour += 12
	}
	local := now.In(loc)
	if m[1] == "" {
		t := time.Date(local.Year(), local.Month(), local.Day(), hour, minute, 0, 0, loc)
		if t.Before(now) {
			t = t.AddDate(0, 0, 1)
		}
		return t, true
	}
	month, err := time.Parse("Jan", m[1])
	if err != nil {
		return time.Time{}, false
	}
	day, _ := strconv.Atoi(m[2])
	year := local.Year()
	if m[3] != "" {
		year, _ = strconv.Atoi(m[3])
	}
	t := time.Date(year, month.Month(), day, hour, minute, 0, 0, loc)
	if m[3] == "" && t.Before(now) {
		t = t.AddDate(1, 0, 0)
	}
	return t, true
}
