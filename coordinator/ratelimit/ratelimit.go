// Package ratelimit is keyed token buckets for the coordinator's edges (the
// API's principals and source addresses, the console's logins): bounded in
// the keys they remember, with the aggregate-record bookkeeping of
// refusals (one record per key per window).
package ratelimit

import (
	"net"
	"sync"
	"time"
)

// MaxKeys bounds the keys a Set remembers: at the bound it forgets the
// buckets that are full again (at most once per sweepEvery), and if every
// key still holds state, new keys share one overflow bucket (limited
// together) rather than grow it.
const MaxKeys = 10000

// overflowKey is the bucket keys share once MaxKeys hold state.
const overflowKey = "\x00overflow"

// Set is a set of token buckets by key: Burst tokens each, refilled at
// Rate a second. A negative Rate turns the limit off.
type Set struct {
	rate  float64
	burst float64
	now   func() time.Time

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

// sweepEvery bounds how often a full Set is swept (a sweep visits every
// key): a flood of new keys costs one sweep a second, not one a key.
const sweepEvery = time.Second

type bucket struct {
	tokens float64
	at     time.Time
	// The aggregate record: when the key was last recorded, and the
	// refusals since.
	recorded time.Time
	refused  int
}

// New returns a Set; now nil means time.Now.
func New(rate float64, burst int, now func() time.Time) *Set {
	if now == nil {
		now = time.Now
	}
	return &Set{rate: rate, burst: float64(burst), now: now, buckets: map[string]*bucket{}}
}

// Off reports whether the limit is turned off.
func (s *Set) Off() bool { return s == nil || s.rate < 0 }

// Take spends one token of key; without one it reports how long until
// there is one.
func (s *Set) Take(key string) (bool, time.Duration) {
	if s.Off() {
		return true, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.get(key, s.now())
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, s.wait(b)
}

// Empty reports whether key has no token left, without spending one, and
// how long until it has.
func (s *Set) Empty(key string) (bool, time.Duration) {
	if s.Off() {
		return false, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buckets[key]
	if b == nil {
		return false, 0
	}
	b.refill(s, s.now())
	if b.tokens >= 1 {
		return false, 0
	}
	return true, s.wait(b)
}

// Refusal counts a refusal of key and reports whether it is the one to
// record in this window (the first refusal after window has passed since
// the last record), with how many refusals since the last record it stands
// for.
func (s *Set) Refusal(key string, window time.Duration) (bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	b := s.get(key, now)
	b.refused++
	if !b.recorded.IsZero() && now.Sub(b.recorded) < window {
		return false, 0
	}
	b.recorded = now
	n := b.refused
	b.refused = 0
	return true, n
}

// Admit spends one token of key like Take; a refusal is counted and not
// reported, and the next admitted call reports how many refusals were
// folded since the one before (a record that stands for them).
func (s *Set) Admit(key string) (bool, int) {
	if s.Off() {
		return true, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.get(key, s.now())
	if b.tokens < 1 {
		b.refused++
		return false, 0
	}
	b.tokens--
	n := b.refused
	b.refused = 0
	return true, n
}

// Len is the number of keys remembered.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.buckets)
}

// get returns key's bucket refilled to now; s.mu is held.
func (s *Set) get(key string, now time.Time) *bucket {
	b := s.buckets[key]
	if b == nil {
		if len(s.buckets) >= MaxKeys && now.Sub(s.lastSweep) >= sweepEvery {
			s.lastSweep = now
			s.sweep(now)
		}
		if len(s.buckets) >= MaxKeys {
			key = overflowKey
			b = s.buckets[key]
		}
		if b == nil {
			b = &bucket{tokens: s.burst, at: now}
			s.buckets[key] = b
		}
	}
	b.refill(s, now)
	return b
}

func (b *bucket) refill(s *Set, now time.Time) {
	if s.rate > 0 {
		b.tokens = min(s.burst, b.tokens+now.Sub(b.at).Seconds()*s.rate)
	}
	b.at = now
}

// sweep forgets the buckets that are full again and owe no record.
func (s *Set) sweep(now time.Time) {
	for key, b := range s.buckets {
		if b.refused == 0 && (s.rate > 0 && b.tokens+now.Sub(b.at).Seconds()*s.rate >= s.burst) {
			delete(s.buckets, key)
		}
	}
}

func (s *Set) wait(b *bucket) time.Duration {
	if s.rate <= 0 {
		return time.Hour
	}
	return time.Duration((1 - b.tokens) / s.rate * float64(time.Second))
}

// SourceKey is the key of a request's source address (http.Request's
// RemoteAddr): the IP, an IPv6 address's /64 (one host holds a whole
// /64), "local" for a Unix socket.
func SourceKey(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return "local"
	case ip.To4() != nil:
		return ip.String()
	}
	return (&net.IPNet{IP: ip.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
}
