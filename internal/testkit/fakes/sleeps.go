package fakes

import (
	"context"
	"sync"
	"time"
)

// Sleeps stands in for the wait between a call's attempts: Sleep records
// the wait asked for and returns at once (with the context's error, as a
// real wait cut short would).
type Sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

// Sleep records d.
func (s *Sleeps) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

// Waits are the waits recorded so far, in order.
func (s *Sleeps) Waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}
