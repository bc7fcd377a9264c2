package abusetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/authn/oidctest"
)

// The figures of docs/PERFORMANCE.md "Hostile callers" (go test -run '^$'
// -bench . -benchtime 1x ./coordinator/abusetest/). Each benchmark runs
// its flood once per iteration against a fresh coordinator.

// BenchmarkRefusedWrites: what a flood of refused writes (oversized names,
// documents and request targets, denied creates) costs the coordinator:
// audit bytes and raft.db bytes per refused request, and the heap and RSS
// it holds afterwards.
func BenchmarkRefusedWrites(b *testing.B) {
	const n = 300
	for range b.N {
		tg := start(b, options{})
		tg.must(http.StatusCreated, tg.token, "POST", "/v1/namespaces", map[string]any{"name": "team"}, nil)
		mallory := tg.user("mallory")
		db, heap0, rss0 := tg.raftDB(), heap(), rss(b)
		audit0, _ := tg.auditBytes()
		start := time.Now()
		refusedFlood(tg, mallory, n)
		took := time.Since(start)
		audit1, _ := tg.auditBytes()
		b.ReportMetric(float64(audit1-audit0)/n, "audit-B/refused")
		b.ReportMetric(float64(tg.raftDB()-db)/n, "raftdb-B/refused")
		b.ReportMetric((float64(heap())-float64(heap0))/(1<<20), "heap-MB-held")
		b.ReportMetric((float64(rss(b))-float64(rss0))/(1<<20), "rss-MB-growth")
		b.ReportMetric(float64(n)/took.Seconds(), "refused/s")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkForgedJWTs: key-set fetches per forged JWT (a forged signature
// under the issuer's key id, or an unknown key id), through the
// coordinator ("after") and through go-oidc's own remote key set, which
// the coordinator used before issue 25 ("before"), in the same run.
func BenchmarkForgedJWTs(b *testing.B) {
	const n = 600
	for range b.N {
		tg := start(b, options{})
		good, err := tg.issuer.Sign(oidctest.Claims{Subject: "alice"})
		require.NoError(b, err)
		tg.must(http.StatusOK, good, "GET", "/v1/whoami", nil, nil)
		forger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(b, err)
		before := tg.issuer.KeyFetches()
		floodForged(b, tg, forger, n)
		after := float64(tg.issuer.KeyFetches()-before) / n

		// The library's remote key set, against the same issuer.
		ctx := context.Background()
		v := oidc.NewVerifier(tg.issuer.URL(), oidc.NewRemoteKeySet(ctx, tg.issuer.URL()+"/keys"),
			&oidc.Config{ClientID: audience, SupportedSigningAlgs: []string{"ES256"}})
		lib0 := tg.issuer.KeyFetches()
		for i := range n {
			kid := tg.issuer.CurrentKeyID()
			if i%2 == 1 {
				kid = fmt.Sprintf("forged-%d", i)
			}
			tok, err := oidctest.SignWith(forger, kid, map[string]any{"iss": tg.issuer.URL(), "aud": audience,
				"sub": "mallory", "exp": time.Now().Add(time.Hour).Unix()})
			require.NoError(b, err)
			_, err = v.Verify(ctx, tok)
			require.Error(b, err)
		}
		lib := float64(tg.issuer.KeyFetches()-lib0) / n
		b.ReportMetric(after, "fetches/forged")
		b.ReportMetric(lib, "before-fetches/forged")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkMissingNameReads: Raft entries appended per read of a missing
// name (a Raft barrier each, before issue 25).
func BenchmarkMissingNameReads(b *testing.B) {
	const n = 300
	for range b.N {
		tg := start(b, options{})
		idx := tg.settled()
		start := time.Now()
		for i := range n {
			s, _ := tg.call(tg.token, "GET", fmt.Sprintf("/v1/namespaces/gone-%d", i), nil)
			require.Equal(b, http.StatusNotFound, s)
		}
		b.ReportMetric(float64(tg.lastIndex()-idx)/n, "entries/read")
		b.ReportMetric(float64(time.Since(start).Microseconds())/n, "µs/read")
	}
	b.ReportMetric(0, "ns/op")
}
