package logging

import (
	"sync"
	"time"
)

// Throttle lets a repeated message through at most once per interval (the
// Gateway's "Waiting for Harness plugin runtime status" line, every 30 s at
// most). It is safe for concurrent use.
type Throttle struct {
	interval time.Duration
	clk      func() time.Time

	mu   sync.Mutex
	last time.Time
	seen bool
}

// NewThrottle returns a Throttle; clk nil means time.Now.
func NewThrottle(interval time.Duration, clk func() time.Time) *Throttle {
	if clk == nil {
		clk = time.Now
	}
	return &Throttle{interval: interval, clk: clk}
}

// Allow reports whether the message may be logged now: the first call, and
// then once interval has passed since the last allowed call.
func (t *Throttle) Allow() bool {
	now := t.clk()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen && now.Sub(t.last) < t.interval {
		return false
	}
	t.seen, t.last = true, now
	return true
}

// Reset makes the next Allow succeed (for example after the peer reported).
func (t *Throttle) Reset() {
	t.mu.Lock()
	t.seen = false
	t.mu.Unlock()
}
