package ocproto

import "time"

// Reconnect backoff bounds of the reference client.
const (
	ReconnectMin = time.Second
	ReconnectMax = 30 * time.Second
)

// Backoff doubles from Min to Max; Reset after a successful hello-ok.
type Backoff struct {
	Min, Max time.Duration
	next     time.Duration
}

// Next returns the delay before the next attempt.
func (b *Backoff) Next() time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = ReconnectMin
	}
	if hi <= 0 {
		hi = ReconnectMax
	}
	if b.next < lo {
		b.next = lo
	}
	d := b.next
	b.next *= 2
	if b.next > hi {
		b.next = hi
	}
	return d
}

// Reset starts the sequence over.
func (b *Backoff) Reset() { b.next = 0 }
