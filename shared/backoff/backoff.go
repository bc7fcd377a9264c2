// Package backoff is the one exponential backoff every oce component uses:
// the engine's requeue of failed work, the API client's retries and the
// node's reconnects. A delay doubles from Base per attempt up to Max;
// Jittered spreads it so retrying peers do not move in step.
package backoff

import "time"

// Policy is Base doubling per attempt, at most Max.
type Policy struct {
	Base, Max time.Duration
}

// Delay is the pause before retry number attempt (0 for the first retry):
// min(Max, Base·2^attempt). A Max below Base is Base.
func (p Policy) Delay(attempt int) time.Duration {
	d := p.Base
	for range max(attempt, 0) {
		if d >= p.Max || d > (1<<62)/2 {
			break
		}
		d *= 2
	}
	return max(p.Base, min(d, p.Max))
}

// Jittered draws d into [d/2, d]; int64n is the caller's source of
// randomness (rand.Int64N, or a seeded one in tests): n > 0 → [0, n).
func Jittered(d time.Duration, int64n func(n int64) int64) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + time.Duration(int64n(int64(d-d/2)+1))
}

// Sequence hands out a policy's delays one after another: Next after each
// failure, Reset after a success.
type Sequence struct {
	Policy
	attempt int
}

// Next returns the next delay.
func (s *Sequence) Next() time.Duration {
	d := s.Delay(s.attempt)
	if d < s.Max {
		s.attempt++
	}
	return d
}

// Reset starts the sequence over.
func (s *Sequence) Reset() { s.attempt = 0 }
