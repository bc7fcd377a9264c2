package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Idempotency records make a retried request take effect once. A command
// proposed for a request that carries an Idempotency-Key is stamped with the
// key and a hash of the request; Apply records the key together with the
// command's result in the same entry as the effect. A later command stamped
// with the same (actor, key) changes nothing: with the same hash Apply
// returns a *Replay of the recorded result, with another hash it fails with
// ErrIdempotencyMismatch. Only successful commands are recorded — a refused
// command changes nothing, so repeating it is already safe.
//
// Records expire IdempotencyTTL after the entry that created them (by the
// leader-stamped entry time, so every replica expires them alike) and at most
// MaxIdempotencyRecords are kept, oldest evicted first.
const (
	IdempotencyTTL        = time.Hour
	MaxIdempotencyRecords = 10000
	// MaxIdempotencyKeyLen bounds a key (the API refuses longer ones).
	MaxIdempotencyKeyLen = 255
)

// ErrIdempotencyMismatch: the key was used before for a different request.
var ErrIdempotencyMismatch = errors.New("state: idempotency key reused for a different request")

// Idempotency is the stamp of a command proposed for a keyed request.
type Idempotency struct {
	Key string `json:"key"`
	// Hash identifies the request (method, path and body); a reuse of the
	// key with another hash is refused.
	Hash string `json:"hash"`
	// Status is the HTTP status the original answer carries.
	Status int `json:"status"`
}

// IdempotencyRecord is one recorded keyed write.
type IdempotencyRecord struct {
	Actor     string          `json:"actor,omitempty"`
	Key       string          `json:"key"`
	Hash      string          `json:"hash"`
	Status    int             `json:"status"`
	Type      string          `json:"type"`   // the command type
	Result    json.RawMessage `json:"result"` // the command's result, as JSON
	CreatedAt time.Time       `json:"createdAt"`
	ExpiresAt time.Time       `json:"expiresAt"`
}

// Replay is what Apply returns, changing nothing, for a stamped command
// whose key was recorded with the same hash.
type Replay struct {
	Record IdempotencyRecord
}

// idemKey scopes a key to its actor: two principals never share keys.
type idemKey struct{ actor, key string }

// idempotency is the replicated record set: a map plus the insertion order,
// which decides eviction and the snapshot's order.
type idempotency struct {
	byKey map[idemKey]IdempotencyRecord
	order []idemKey // oldest first; entries before head are gone
	head  int
}

func (x *idempotency) len() int { return len(x.order) - x.head }

// live returns the record of k unless it is missing or expired at t.
func (x *idempotency) live(k idemKey, t time.Time) (IdempotencyRecord, bool) {
	r, ok := x.byKey[k]
	if !ok || !t.Before(r.ExpiresAt) {
		return IdempotencyRecord{}, false
	}
	return r, true
}

// put records r (its key is new or expired) and evicts expired and excess
// records from the old end.
func (x *idempotency) put(r IdempotencyRecord, now time.Time) {
	if x.byKey == nil {
		x.byKey = map[idemKey]IdempotencyRecord{}
	}
	k := idemKey{r.Actor, r.Key}
	if _, ok := x.byKey[k]; ok {
		// An expired record of the same key: forget its old position.
		x.remove(k)
	}
	x.byKey[k] = r
	x.order = append(x.order, k)
	for x.len() > 0 {
		oldest := x.byKey[x.order[x.head]]
		if x.len() <= MaxIdempotencyRecords && now.Before(oldest.ExpiresAt) {
			break
		}
		delete(x.byKey, x.order[x.head])
		x.order[x.head] = idemKey{}
		x.head++
	}
	if x.head > 64 && x.head*2 > len(x.order) {
		x.order = append([]idemKey(nil), x.order[x.head:]...)
		x.head = 0
	}
}

// remove drops k from the order (rare: only when an expired key is reused).
func (x *idempotency) remove(k idemKey) {
	for i := x.head; i < len(x.order); i++ {
		if x.order[i] == k {
			x.order = append(x.order[:i:i], x.order[i+1:]...)
			return
		}
	}
}

// records returns the records oldest first.
func (x *idempotency) records() []IdempotencyRecord {
	out := make([]IdempotencyRecord, 0, x.len())
	for _, k := range x.order[x.head:] {
		out = append(out, x.byKey[k])
	}
	return out
}

// load adds a restored record in order; duplicates are corrupt.
func (x *idempotency) load(r IdempotencyRecord) error {
	if x.byKey == nil {
		x.byKey = map[idemKey]IdempotencyRecord{}
	}
	k := idemKey{r.Actor, r.Key}
	if _, ok := x.byKey[k]; ok {
		return errDuplicate("idempotency key", r.Key)
	}
	x.byKey[k] = r
	x.order = append(x.order, k)
	return nil
}

func validIdempotency(p *Idempotency) error {
	if p.Key == "" || len(p.Key) > MaxIdempotencyKeyLen || p.Hash == "" || p.Status < 200 || p.Status > 299 {
		return fmt.Errorf("%w: idempotency stamp needs a key of 1-%d bytes, a hash and a 2xx status",
			ErrInvalid, MaxIdempotencyKeyLen)
	}
	return nil
}

// applyStamped runs h for a command stamped with an idempotency key; d is
// locked for writing. It reports whether the state changed.
func applyStamped(d *data, c Command, h handler) (any, bool, error) {
	p := c.Idempotency
	if err := validIdempotency(p); err != nil {
		return nil, false, err
	}
	k := idemKey{c.Actor, p.Key}
	if r, ok := d.idem.live(k, c.Time); ok {
		if r.Hash != p.Hash {
			return nil, false, fmt.Errorf("%w: key %q", ErrIdempotencyMismatch, p.Key)
		}
		return &Replay{Record: r}, false, nil
	}
	res, err := h(d, c)
	if err != nil {
		return nil, false, err
	}
	// The results are plain structs: encoding them cannot fail.
	b, _ := json.Marshal(res)
	d.idem.put(IdempotencyRecord{Actor: c.Actor, Key: p.Key, Hash: p.Hash, Status: p.Status, Type: c.Type,
		Result: b, CreatedAt: c.Time, ExpiresAt: c.Time.Add(IdempotencyTTL)}, c.Time)
	return res, true, nil
}

// IdempotencyRecord returns the record of actor's key unless it is missing
// or expired at now.
func (m *Machine) IdempotencyRecord(actor, key string, now time.Time) (IdempotencyRecord, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	r, ok := m.d.idem.live(idemKey{actor, key}, now)
	r.Result = cloneRaw(r.Result)
	return r, ok
}

// IdempotencyRecords counts the records held (expired ones included until
// evicted).
func (m *Machine) IdempotencyRecords() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.d.idem.len()
}

type idempotencyCtxKey struct{}

// WithIdempotency returns a context whose proposals carry the stamp p; the
// store reads it when it encodes the command.
func WithIdempotency(ctx context.Context, p Idempotency) context.Context {
	return context.WithValue(ctx, idempotencyCtxKey{}, p)
}

// IdempotencyFrom returns the stamp set by WithIdempotency, or nil.
func IdempotencyFrom(ctx context.Context) *Idempotency {
	p, ok := ctx.Value(idempotencyCtxKey{}).(Idempotency)
	if !ok {
		return nil
	}
	return &p
}
