package mockllm

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Refusal names a refusal that each API words in its own way: the mock
// answers it with the status, error body and headers that API's
// documentation gives, so that a real CLI reads it as it would read the
// real API's.
type Refusal string

const (
	// OutOfCredit: the account has no quota or credit left, and waiting
	// will not bring it back. Anthropic: 400 invalid_request_error "Your
	// credit balance is too low…". OpenAI: 429 with type and code
	// insufficient_quota. Gemini: 429 RESOURCE_EXHAUSTED naming billing, with
	// a QuotaFailure whose quota is per day.
	OutOfCredit Refusal = "credit"
	// OverContext: the prompt is larger than the model's context window.
	// Anthropic: 400 invalid_request_error "prompt is too long: N tokens >
	// L maximum". OpenAI: 400 invalid_request_error with code
	// context_length_exceeded. Gemini: 400 INVALID_ARGUMENT "The input
	// token count (N) exceeds the maximum number of tokens allowed (L)."
	OverContext Refusal = "context"
	// MinuteQuota: a per-minute quota that resets by itself: 429 with the
	// server's retry time (RetryAfter, 30 s when unset). Gemini words it as
	// its free tier does: the billing sentence, a QuotaFailure whose quota
	// is per minute and a RetryInfo with the delay; the other APIs answer
	// their usual 429 with a Retry-After header.
	MinuteQuota Refusal = "minute"
)

// Refusals are the refusals the mock knows, for its command line.
var Refusals = []Refusal{OutOfCredit, OverContext, MinuteQuota}

// The sizes an OverContext refusal reports unless the Failure sets them.
const (
	DefaultPromptTokens = 212345
	DefaultContextLimit = 200000
	// Gemini's models have a window of a million tokens.
	DefaultGeminiPromptTokens = 1212345
	DefaultGeminiContextLimit = 1048576
)

// Messages of the refusals, as the APIs word them.
const (
	AnthropicCreditMessage = "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."
	OpenAIQuotaMessage     = "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."
	GoogleQuotaMessage     = "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
)

// refusal is one refusal in one protocol's terms.
type refusal struct {
	status  int
	kind    string // Anthropic's and OpenAI's error type, Google's status
	code    string // OpenAI's error code
	param   string // OpenAI's param
	message string
	details []any // Google's error details
	headers map[string]string
}

// sizes are the prompt size and window an OverContext refusal reports.
func (f *Failure) sizes(p Protocol) (tokens, limit int) {
	tokens, limit = DefaultPromptTokens, DefaultContextLimit
	if p == Gemini {
		tokens, limit = DefaultGeminiPromptTokens, DefaultGeminiContextLimit
	}
	if f.Tokens > 0 {
		tokens = f.Tokens
	}
	if f.Limit > 0 {
		limit = f.Limit
	}
	return tokens, limit
}

// retrySeconds is the server's retry time of a MinuteQuota refusal.
func (f *Failure) retrySeconds() string {
	if f.RetryAfter != "" {
		return f.RetryAfter
	}
	return "30"
}

// refusalIn is f's refusal in protocol p; false when f names none.
func (f *Failure) refusalIn(p Protocol, model string) (refusal, bool) {
	var r refusal
	switch f.Refusal {
	case OutOfCredit:
		switch p {
		case Anthropic:
			r = refusal{status: http.StatusBadRequest, kind: "invalid_request_error", message: AnthropicCreditMessage}
		case Responses, Chat:
			r = refusal{status: http.StatusTooManyRequests, kind: "insufficient_quota", code: "insufficient_quota", message: OpenAIQuotaMessage}
		case Gemini:
			r = refusal{status: http.StatusTooManyRequests, kind: "RESOURCE_EXHAUSTED",
				message: GoogleQuotaMessage + "\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 250, model: " + model,
				details: []any{
					quotaFailure("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "250", model),
					googleHelp(),
				}}
		}
	case OverContext:
		tokens, limit := f.sizes(p)
		switch p {
		case Anthropic:
			r = refusal{status: http.StatusBadRequest, kind: "invalid_request_error",
				message: fmt.Sprintf("prompt is too long: %d tokens > %d maximum", tokens, limit)}
		case Responses:
			r = refusal{status: http.StatusBadRequest, kind: "invalid_request_error", code: "context_length_exceeded", param: "input",
				message: "Your input exceeds the context window of this model. Please adjust your input and try again."}
		case Chat:
			r = refusal{status: http.StatusBadRequest, kind: "invalid_request_error", code: "context_length_exceeded", param: "messages",
				message: fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", limit, tokens)}
		case Gemini:
			r = refusal{status: http.StatusBadRequest, kind: "INVALID_ARGUMENT",
				message: fmt.Sprintf("The input token count (%d) exceeds the maximum number of tokens allowed (%d).", tokens, limit)}
		}
	case MinuteQuota:
		secs := f.retrySeconds()
		r = refusal{status: http.StatusTooManyRequests, headers: map[string]string{"Retry-After": secs}}
		switch p {
		case Responses, Chat:
			r.kind, r.code = "requests", "rate_limit_exceeded"
			r.message = "Rate limit reached for requests. Please try again in " + secs + "s."
		case Gemini:
			r.kind = "RESOURCE_EXHAUSTED"
			r.message = GoogleQuotaMessage + "\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10, model: " + model +
				"\nPlease retry in " + secs + "s."
			r.details = []any{
				quotaFailure("GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "10", model),
				googleHelp(),
				map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": secs + "s"},
			}
		}
	default:
		return refusal{}, false
	}
	if f.Status != 0 {
		r.status = f.Status
	}
	if f.Message != "" {
		r.message = f.Message
	}
	return r, true
}

func quotaFailure(quotaID, value, model string) map[string]any {
	return map[string]any{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{map[string]any{
		"quotaMetric":     "generativelanguage.googleapis.com/generate_content_free_tier_requests",
		"quotaId":         quotaID,
		"quotaDimensions": map[string]any{"location": "global", "model": model},
		"quotaValue":      value,
	}}}
}

func googleHelp() map[string]any {
	return map[string]any{"@type": "type.googleapis.com/google.rpc.Help", "links": []any{map[string]any{
		"description": "Learn more about Gemini API quotas", "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}}}
}

// resetTime is when a limit that resets after the Retry-After seconds of f
// resets, from now: RFC 3339, as Anthropic's rate-limit headers give it.
func resetTime(f *Failure, now time.Time) string {
	secs, err := strconv.ParseFloat(strings.TrimSpace(f.RetryAfter), 64)
	if err != nil {
		return ""
	}
	return now.Add(time.Duration(secs * float64(time.Second))).UTC().Format(time.RFC3339)
}
