package authn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// The issuer's key set, fetched at a fixed maximum rate whatever arrives.
// go-oidc's remote key set fetches again after every signature it cannot
// verify, so every forged JWT a caller sends would make the coordinator
// call the issuer. Here a token naming a key the set holds is verified
// against that key only (a failed signature is a forgery: the issuer never
// reuses a key id for another key), and a key id the set does not hold
// makes one fetch at most every refresh interval; tokens arriving in
// between are refused without one. A rotated key is therefore accepted at
// most one interval after the issuer publishes it.

// DefaultJWKSRefresh is the least time between two fetches of the issuer's
// key set.
const DefaultJWKSRefresh = 30 * time.Second

// Bounds of a fetched key set.
const (
	maxJWKSBytes = 1 << 20
	maxJWKSKeys  = 100
)

// ErrUnknownKey: the token names a key the issuer's key set does not hold
// (and the set was fetched within the refresh interval).
var ErrUnknownKey = errors.New("authn: the token's signing key is not in the issuer's key set")

// keySet implements oidc.KeySet with a rate-limited refresh.
type keySet struct {
	uri     string
	client  *http.Client
	every   time.Duration
	now     func() time.Time
	algs    []jose.SignatureAlgorithm
	fetches atomic.Int64

	mu        sync.Mutex
	keys      []jose.JSONWebKey
	fetchedAt time.Time     // the last fetch's start, successful or not
	inflight  chan struct{} // closed when the running fetch ends
}

func newKeySet(uri string, client *http.Client, every time.Duration, now func() time.Time, algs []string) *keySet {
	ks := &keySet{uri: uri, client: client, every: every, now: now}
	for _, a := range algs {
		ks.algs = append(ks.algs, jose.SignatureAlgorithm(a))
	}
	if len(ks.algs) == 0 {
		ks.algs = []jose.SignatureAlgorithm{jose.RS256}
	}
	return ks
}

// VerifySignature implements oidc.KeySet.
func (ks *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, ks.algs)
	if err != nil {
		return nil, fmt.Errorf("authn: malformed JWT: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("authn: a JWT carries exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	payload, known, err := verifyWith(jws, kid, ks.cached())
	if err == nil || known {
		return payload, err
	}
	if !ks.refresh(ctx) {
		return nil, ErrUnknownKey
	}
	payload, _, err = verifyWith(jws, kid, ks.cached())
	return payload, err
}

// verifyWith verifies jws with the keys named kid (every key when kid is
// empty); known reports whether some key matched the name.
func verifyWith(jws *jose.JSONWebSignature, kid string, keys []jose.JSONWebKey) ([]byte, bool, error) {
	known := false
	for i := range keys {
		if kid != "" && keys[i].KeyID != kid {
			continue
		}
		known = kid != ""
		if payload, err := jws.Verify(&keys[i]); err == nil {
			return payload, true, nil
		}
	}
	if known {
		return nil, true, errors.New("authn: the token's signature does not verify")
	}
	return nil, false, ErrUnknownKey
}

func (ks *keySet) cached() []jose.JSONWebKey {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.keys
}

// refresh fetches the key set unless one was fetched within the interval;
// a caller arriving while a fetch runs waits for it. It reports whether the
// set may have changed.
func (ks *keySet) refresh(ctx context.Context) bool {
	ks.mu.Lock()
	if wait := ks.inflight; wait != nil {
		ks.mu.Unlock()
		select {
		case <-wait:
			return true
		case <-ctx.Done():
			return false
		}
	}
	now := ks.now()
	if !ks.fetchedAt.IsZero() && now.Sub(ks.fetchedAt) < ks.every {
		ks.mu.Unlock()
		return false
	}
	ks.fetchedAt = now
	done := make(chan struct{})
	ks.inflight = done
	ks.mu.Unlock()

	keys, err := ks.fetch()
	ks.mu.Lock()
	if err == nil {
		ks.keys = keys
	}
	ks.inflight = nil
	ks.mu.Unlock()
	close(done)
	return err == nil
}

// fetch reads the key set. Its context is its own: the set outlives the
// request that asked for it.
func (ks *keySet) fetch() ([]jose.JSONWebKey, error) {
	ks.fetches.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), oidcHTTPTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ks.uri, nil)
	if err != nil {
		return nil, err
	}
	res, err := ks.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("authn: fetching the key set: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("authn: fetching the key set: %s", res.Status)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("authn: reading the key set: %w", err)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("authn: the key set exceeds %d bytes", maxJWKSBytes)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("authn: decoding the key set: %w", err)
	}
	if len(set.Keys) > maxJWKSKeys {
		set.Keys = set.Keys[:maxJWKSKeys]
	}
	return set.Keys, nil
}
