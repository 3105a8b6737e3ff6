package phase

import "context"

type hardStopKey struct{}

// WithHardStop returns ctx carrying hard: once hard is done (a second
// interrupt), the calls made under the returned context skip the kill grace:
// their groups get SIGKILL at once and nothing waits for leftovers or pipes
// any more. Cancelling ctx itself still stops calls gracefully.
func WithHardStop(ctx, hard context.Context) context.Context {
	return context.WithValue(ctx, hardStopKey{}, hard)
}

// hardStop is the hard-stop signal of ctx: a channel that closes on a hard
// stop, never closing when ctx carries none.
func hardStop(ctx context.Context) <-chan struct{} {
	if h, ok := ctx.Value(hardStopKey{}).(context.Context); ok {
		return h.Done()
	}
	return nil
}
