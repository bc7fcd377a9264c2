package api_test

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/apitest"
	"oce.dev/oce/coordinator/authn"
	"oce.dev/oce/coordinator/authn/oidctest"
	"oce.dev/oce/coordinator/state"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestNoTokenInLogsOrState: tokens — bootstrap, minted (good, revoked,
// forged), OIDC (good, expired) — never appear in the API's log, and a
// minted token is stored only as its hash.
func TestNoTokenInLogsOrState(t *testing.T) {
	b := apitest.New()
	is, err := oidctest.New("oce-logs")
	require.NoError(t, err)
	t.Cleanup(is.Close)
	o, err := authn.NewOIDC(authn.OIDCConfig{Issuer: is.URL(), Audience: "oce-logs"})
	require.NoError(t, err)
	logs := &lockedBuffer{}
	const boot = "bootstrap-secret-planted-0123456789"
	srv := httptest.NewServer(api.New(api.Config{Authenticator: authn.New(authn.Config{Bootstrap: boot, Machine: b.M, OIDC: o}),
		Metrics: prometheus.NewRegistry(), WithActor: apitest.WithActor,
		Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, b))
	t.Cleanup(srv.Close)

	status, body := send(t, srv.URL, "POST", "/v1/users", `{"name":"alice"}`, boot)
	require.Equal(t, 201, status, string(body))
	status, body = send(t, srv.URL, "POST", "/v1/tokens", `{"user":"alice","ttl":"1h"}`, boot)
	require.Equal(t, 201, status, string(body))
	minted := string(body[strings.Index(string(body), authn.TokenPrefix):])
	minted = minted[:authn.TokenLen]
	status, _ = send(t, srv.URL, "POST", "/v1/tokens", `{"user":"alice","ttl":"1h"}`, boot)
	require.Equal(t, 201, status)
	good, err := is.Sign(oidctest.Claims{Subject: "zoe"})
	require.NoError(t, err)
	expired, err := is.Sign(oidctest.Claims{Subject: "zoe", Expiry: time.Now().Add(-time.Hour)})
	require.NoError(t, err)
	forged := minted[:len(minted)-3] + "AAA"
	for _, tok := range []string{minted, forged, good, expired, boot + "x"} {
		send(t, srv.URL, "GET", "/v1/whoami", nil, tok)
		send(t, srv.URL, "POST", "/v1/namespaces", `{"name":"nope"}`, tok)
	}
	id, err := authn.ParseToken(minted)
	require.NoError(t, err)
	status, _ = send(t, srv.URL, "DELETE", "/v1/tokens/"+id, nil, boot)
	require.Equal(t, 200, status)
	send(t, srv.URL, "GET", "/v1/whoami", nil, minted)

	out := logs.String()
	require.NotEmpty(t, out)
	for name, secret := range map[string]string{"bootstrap": boot, "minted": minted, "minted secret part": minted[len(authn.TokenPrefix)+33:],
		"oidc": good, "oidc signature": good[strings.LastIndex(good, ".")+1:], "expired": expired} {
		require.NotContains(t, out, secret, "the %s token reached the log", name)
	}
	snap, err := b.M.MarshalSnapshot()
	require.NoError(t, err)
	require.NotContains(t, string(snap), minted[len(authn.TokenPrefix)+33:], "only the hash is stored")
	rec, ok := b.M.Token(id)
	require.True(t, ok)
	require.Equal(t, authn.Hash(minted), rec.Hash)
	require.Equal(t, state.PrincipalUser, rec.PrincipalKind)
}
