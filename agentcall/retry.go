package agentcall

import (
	"time"

	"peal/phase"
)

// retry is the retry retry of agent calls: fatal failures are never
// retried; network failures have their own budget and growing delays; rate
// limits wait for the announced reset, or back off, within
// rate_limit_max_wait_sec; transient failures of the CLI are retried at
// once; ordinary retries wait retry_delay_sec (doubling); with a fallback
// agent even attempts use it.
func (a *Agents) retry(attempts int, classify phase.Classifier) phase.Retry {
	cfg := a.cfg
	p := phase.Retry{Attempts: attempts, Classify: classify, Fallback: a.fallback != nil, Sleep: a.opts.Sleep}
	if d := cfg.RetryDelaySec; d > 0 {
		p.Backoff = phase.Exponential(time.Duration(d)*time.Second, 10*time.Minute, 0)
	}
	maxWait := time.Duration(cfg.RateLimitMaxWaitSec) * time.Second
	rateRetries := 0
	if maxWait > 0 {
		rateRetries = maxRateLimitRetries
	}
	p.Budgets = map[phase.Class]phase.Budget{
		phase.Network:     cfg.NetworkBudget(),
		phase.RateLimited: {Retries: rateRetries, Backoff: phase.Exponential(rateLimitFirstWait, rateLimitLongestWait, 0.1), MaxWait: maxWait},
		phase.Transient:   {Retries: transientRetries},
	}
	return p
}

const (
	// A rate limit without an announced reset waits 30 s, doubling up to
	// 5 minutes, until rate_limit_max_wait_sec is spent.
	rateLimitFirstWait   = 30 * time.Second
	rateLimitLongestWait = 5 * time.Minute
	maxRateLimitRetries  = 100
	// Transient failures of the CLI (Cursor's configuration-file race) are
	// retried at once, this many times per call.
	transientRetries = 3
)
