package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/shared/backoff"
)

// Header names of the API (docs/API.md); the api package defines the same.
const (
	// IdempotencyKeyHeader carries a write's key.
	IdempotencyKeyHeader = "Idempotency-Key"
	// IndexHeader names the applied index an answer was served at.
	IndexHeader = "X-Oce-Index"
	// ReplayedHeader marks a write's answer replayed from its key's record.
	ReplayedHeader = "Idempotent-Replayed"
	// WaitClampedHeader carries the wait a blocking query actually used.
	WaitClampedHeader = "X-Oce-Wait-Clamped"
)

// Retry bounds how often one call is sent again after a failure that is
// safe to retry, and the pause between attempts: Base, doubling, at most Max.
type Retry struct {
	Attempts  int
	Base, Max time.Duration
}

// DefaultRetry rides out a leader election (under a second with the default
// timings) and a lost answer, adding at most 250 ms to a call once the
// cluster answers again; a call's context bounds it as well.
var DefaultRetry = Retry{Attempts: 10, Base: 25 * time.Millisecond, Max: 250 * time.Millisecond}

func (r Retry) delay(attempt int) time.Duration {
	return backoff.Policy{Base: r.Base, Max: r.Max}.Delay(attempt)
}

// WithRetry replaces DefaultRetry; Attempts 0 sends every call once.
func WithRetry(r Retry) Option { return func(c *Client) { c.retry = r } }

// WithMonotonicReads makes every read ask for at least the highest index
// this client has seen in any answer (its own writes included), so reads
// never go backwards, whichever member answers.
func WithMonotonicReads() Option { return func(c *Client) { c.mono = true } }

// Index is the highest applied index this client has seen in an answer.
func (c *Client) Index() uint64 { return c.highest.Load() }

type keyCtx struct{}

// WithIdempotencyKey returns a context whose write carries key instead of a
// fresh one: a caller that repeats a logical write in a new call (another
// member, a later attempt) passes the same key each time.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyCtx{}, key)
}

// NewIdempotencyKey returns a random key (128 bits, hex).
func NewIdempotencyKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func keyFrom(ctx context.Context) string {
	if k, ok := ctx.Value(keyCtx{}).(string); ok && k != "" {
		return k
	}
	return NewIdempotencyKey()
}

// ReadOptions choose how fresh the state a read is served from must be
// (docs/API.md, "Consistency"). The zero value is the default read.
type ReadOptions struct {
	// Consistent asks for a linearizable read, served by the leader.
	Consistent bool
	// Stale accepts any member's state, however far behind.
	Stale bool
	// MinIndex asks for a state that has applied at least this index.
	MinIndex uint64
	// Wait, with MinIndex, makes the read a blocking query: it answers once
	// the state passes MinIndex, or after Wait (capped by the server).
	Wait time.Duration
}

type readCtx struct{}

// WithReadOptions returns a context whose reads carry o.
func WithReadOptions(ctx context.Context, o ReadOptions) context.Context {
	return context.WithValue(ctx, readCtx{}, o)
}

// Meta is what the answer to a call said about the state it came from.
type Meta struct {
	// Index is the applied index the answer was served at.
	Index uint64
	// Replayed is true for a write answered from its key's record.
	Replayed bool
	// WaitClamped is the wait a blocking query used when the one asked
	// for exceeded the server's cap (zero otherwise).
	WaitClamped time.Duration
}

type metaCtx struct{}

// WithMeta returns a context whose call fills *m from its final answer.
func WithMeta(ctx context.Context, m *Meta) context.Context {
	return context.WithValue(ctx, metaCtx{}, m)
}

// readQuery adds the read options of ctx (or the client's monotonic floor).
func (c *Client) readQuery(ctx context.Context, q url.Values) url.Values {
	o, ok := ctx.Value(readCtx{}).(ReadOptions)
	if !ok && c.mono {
		o.MinIndex = c.Index()
	}
	if o == (ReadOptions{}) {
		return q
	}
	out := url.Values{}
	for k, v := range q {
		out[k] = v
	}
	switch {
	case o.Consistent:
		out.Set("consistent", "")
	case o.Stale:
		out.Set("stale", "")
	}
	if o.MinIndex > 0 || o.Wait > 0 {
		out.Set("index", strconv.FormatUint(o.MinIndex, 10))
	}
	if o.Wait > 0 {
		out.Set("wait", o.Wait.String())
	}
	return out
}

// observe notes an answer's index and fills the call's Meta.
func (c *Client) observe(ctx context.Context, resp *http.Response) {
	idx, err := strconv.ParseUint(resp.Header.Get(IndexHeader), 10, 64)
	if err == nil {
		for {
			cur := c.highest.Load()
			if idx <= cur || c.highest.CompareAndSwap(cur, idx) {
				break
			}
		}
	}
	m, ok := ctx.Value(metaCtx{}).(*Meta)
	if !ok {
		return
	}
	*m = Meta{Index: idx, Replayed: resp.Header.Get(ReplayedHeader) == "true"}
	if d, err := time.ParseDuration(resp.Header.Get(WaitClampedHeader)); err == nil {
		m.WaitClamped = d
	}
}

// WaitIndex is a blocking query for change: it returns once the state of
// the server passes index (at once for index 0), or after wait, with the
// applied index then. Watchers re-read what they show whenever it moves.
func (c *Client) WaitIndex(ctx context.Context, index uint64, wait time.Duration) (uint64, error) {
	var out wire.Index
	var m Meta
	ctx = WithMeta(WithReadOptions(ctx, ReadOptions{MinIndex: index, Wait: wait}), &m)
	if err := c.do(ctx, http.MethodGet, "/v1/index", nil, nil, &out); err != nil {
		return index, err
	}
	return max(out.Index, m.Index), nil
}

// WatchAgent is a blocking read of one Agent: it answers once the state
// passes index (at once for index 0) or after wait, with the Agent and the
// index it was served at — the index to pass next.
func (c *Client) WatchAgent(ctx context.Context, ns, agent string, index uint64, wait time.Duration) (wire.Agent, uint64, error) {
	var m Meta
	a, err := c.Agent(WithMeta(WithReadOptions(ctx, ReadOptions{MinIndex: index, Wait: wait}), &m), ns, agent)
	return a, m.Index, err
}
