package authn_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/authn"
	"oce.dev/oce/coordinator/authn/oidctest"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func apply(t *testing.T, m *state.Machine, at time.Time, typ state.Named, p any) {
	t.Helper()
	b, err := state.Encode(typ.Name(), at, "bootstrap", p)
	require.NoError(t, err)
	_, err = m.ApplyBytes(b)
	require.NoError(t, err)
}

func TestMintParse(t *testing.T) {
	a, err := authn.Mint()
	require.NoError(t, err)
	b, err := authn.Mint()
	require.NoError(t, err)
	require.NotEqual(t, a.Token, b.Token)
	require.Len(t, a.Token, authn.TokenLen)
	id, err := authn.ParseToken(a.Token)
	require.NoError(t, err)
	require.Equal(t, a.ID, id)
	require.Equal(t, authn.Hash(a.Token), a.Hash)
	require.NotContains(t, a.Hash, a.Token[len(authn.TokenPrefix)+33:])
	for _, bad := range []string{"", a.Token[:len(a.Token)-1], a.Token + "A", strings.Replace(a.Token, "_", "-", 2),
		"oce_" + strings.Repeat("G", 32) + a.Token[36:], strings.ToUpper(a.Token)} {
		_, err := authn.ParseToken(bad)
		require.ErrorIs(t, err, authn.ErrMalformedToken, bad)
	}
}

func TestAuthenticateTokens(t *testing.T) {
	m := state.NewMachine()
	apply(t, m, t0, state.CmdCreateNamespace, state.CreateNamespace{ID: "ns", Name: "team"})
	apply(t, m, t0, state.CmdCreateUser, state.CreateUser{ID: "u1", Name: "alice", Groups: []string{"devs"}})
	apply(t, m, t0, state.CmdCreateServicePrincipal, state.CreateServicePrincipal{ID: "sp1", NamespaceID: "ns", Name: "ci"})
	mint := func(kind, id string, exp time.Time) authn.Minted {
		tk, err := authn.Mint()
		require.NoError(t, err)
		apply(t, m, t0, state.CmdCreateToken, state.CreateToken{ID: tk.ID, PrincipalKind: kind, PrincipalID: id,
			Hash: tk.Hash, ExpiresAt: exp})
		return tk
	}
	alice := mint(state.PrincipalUser, "u1", t0.Add(time.Hour))
	ci := mint(state.PrincipalServicePrincipal, "sp1", t0.Add(time.Hour))
	short := mint(state.PrincipalUser, "u1", t0.Add(time.Minute))
	revoked := mint(state.PrincipalUser, "u1", t0.Add(time.Hour))
	apply(t, m, t0, state.CmdRevokeToken, state.RevokeToken{TokenID: revoked.ID})
	now := t0.Add(30 * time.Minute)
	a := authn.New(authn.Config{Bootstrap: "boot-strap-token", Machine: m, Clock: func() time.Time { return now }})
	ctx := context.Background()

	p, err := a.Authenticate(ctx, alice.Token)
	require.NoError(t, err)
	require.Equal(t, "user:alice", p.Actor())
	require.Equal(t, []string{"devs"}, p.Groups)
	p, err = a.Authenticate(ctx, ci.Token)
	require.NoError(t, err)
	require.Equal(t, "serviceprincipal:team/ci", p.Actor())
	p, err = a.Authenticate(ctx, "boot-strap-token")
	require.NoError(t, err)
	require.Equal(t, iam.KindBootstrap, p.Kind)

	_, err = a.Authenticate(ctx, short.Token)
	require.ErrorIs(t, err, authn.ErrTokenExpired)
	_, err = a.Authenticate(ctx, revoked.Token)
	require.ErrorIs(t, err, authn.ErrTokenRevoked)
	// A token whose id is known but whose secret differs is unknown.
	forged := alice.Token[:len(alice.Token)-4] + "AAAA"
	if forged == alice.Token {
		forged = alice.Token[:len(alice.Token)-4] + "BBBA"
	}
	_, err = a.Authenticate(ctx, forged)
	require.ErrorIs(t, err, authn.ErrUnknownToken)
	for _, bad := range []string{"", "boot-strap-toke", "boot-strap-token ", "x.y.z"} {
		_, err = a.Authenticate(ctx, bad)
		require.Error(t, err, bad)
	}
	// Deleting the user ends its tokens.
	apply(t, m, t0, state.CmdDeleteUser, state.DeleteUser{UserID: "u1"})
	_, err = a.Authenticate(ctx, alice.Token)
	require.ErrorIs(t, err, authn.ErrUnknownToken)
}

func TestOIDC(t *testing.T) {
	is, err := oidctest.New("oce-test")
	require.NoError(t, err)
	t.Cleanup(is.Close)
	var skew atomic.Int64 // the verifier's clock runs ahead by this much
	clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	o, err := authn.NewOIDC(authn.OIDCConfig{Issuer: is.URL(), Audience: "oce-test", Clock: clock})
	require.NoError(t, err)
	a := authn.New(authn.Config{Machine: state.NewMachine(), OIDC: o})
	ctx := context.Background()

	good, err := is.Sign(oidctest.Claims{Subject: "alice@example.com", Groups: []string{"devs", "ops"}})
	require.NoError(t, err)
	p, err := a.Authenticate(ctx, good)
	require.NoError(t, err)
	require.Equal(t, "user:oidc:alice@example.com", p.Actor())
	require.Equal(t, []string{"oidc:devs", "oidc:ops"}, p.Groups)
	require.True(t, p.External)

	wrongAud, _ := is.Sign(oidctest.Claims{Subject: "alice", Audience: "someone-else"})
	_, err = a.Authenticate(ctx, wrongAud)
	require.ErrorIs(t, err, authn.ErrInvalidJWT)
	expired, _ := is.Sign(oidctest.Claims{Subject: "alice", Expiry: time.Now().Add(-time.Minute)})
	_, err = a.Authenticate(ctx, expired)
	require.ErrorIs(t, err, authn.ErrTokenExpired)
	wrongIss, _ := is.Sign(oidctest.Claims{Subject: "alice", Issuer: "https://elsewhere.invalid"})
	_, err = a.Authenticate(ctx, wrongIss)
	require.ErrorIs(t, err, authn.ErrInvalidJWT)
	forger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	forged, err := oidctest.SignWith(forger, is.CurrentKeyID(), map[string]any{"iss": is.URL(), "aud": "oce-test",
		"sub": "mallory", "exp": time.Now().Add(time.Hour).Unix()})
	require.NoError(t, err)
	_, err = a.Authenticate(ctx, forged)
	require.ErrorIs(t, err, authn.ErrInvalidJWT)
	badGroups, _ := is.Sign(oidctest.Claims{Subject: "alice", Groups: []string{"bad group"}})
	_, err = a.Authenticate(ctx, badGroups)
	require.ErrorIs(t, err, authn.ErrInvalidJWT)

	// Key rotation: a token signed by a key the verifier has not seen makes
	// it fetch the JWKS again — once the refresh interval has passed since
	// the last fetch; a retired key's tokens fail.
	require.NoError(t, is.Rotate())
	is.Retire()
	rotated, _ := is.Sign(oidctest.Claims{Subject: "bob"})
	fetches := is.KeyFetches()
	_, err = a.Authenticate(ctx, rotated)
	require.ErrorIs(t, err, authn.ErrInvalidJWT, "within the interval the new key is not fetched")
	require.Equal(t, fetches, is.KeyFetches())
	skew.Add(int64(authn.DefaultJWKSRefresh))
	p, err = a.Authenticate(ctx, rotated)
	require.NoError(t, err)
	require.Equal(t, "user:oidc:bob", p.Actor())
	_, err = a.Authenticate(ctx, good)
	require.ErrorIs(t, err, authn.ErrInvalidJWT)
	require.Equal(t, fetches+1, is.KeyFetches())
}

// TestOIDCForgedTokensFetchNothing: floods of forged JWTs — a forged
// signature under the issuer's key id, unknown key ids, another issuer —
// make at most one key set fetch per refresh interval, however many
// arrive, concurrently or not.
func TestOIDCForgedTokensFetchNothing(t *testing.T) {
	is, err := oidctest.New("oce-test")
	require.NoError(t, err)
	t.Cleanup(is.Close)
	var skew atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	o, err := authn.NewOIDC(authn.OIDCConfig{Issuer: is.URL(), Audience: "oce-test", Clock: clock})
	require.NoError(t, err)
	a := authn.New(authn.Config{Machine: state.NewMachine(), OIDC: o})
	ctx := context.Background()
	good, err := is.Sign(oidctest.Claims{Subject: "alice"})
	require.NoError(t, err)
	_, err = a.Authenticate(ctx, good)
	require.NoError(t, err)
	require.Equal(t, 1, is.KeyFetches())

	forger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	claims := map[string]any{"iss": is.URL(), "aud": "oce-test", "sub": "mallory", "exp": time.Now().Add(time.Hour).Unix()}
	sameKid, err := oidctest.SignWith(forger, is.CurrentKeyID(), claims)
	require.NoError(t, err)
	otherIss, err := oidctest.SignWith(forger, "kid-x", map[string]any{"iss": "https://elsewhere.invalid", "aud": "oce-test",
		"sub": "mallory", "exp": time.Now().Add(time.Hour).Unix()})
	require.NoError(t, err)
	const n = 600
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := sameKid
			switch i % 3 {
			case 1:
				tok, _ = oidctest.SignWith(forger, fmt.Sprintf("kid-%d", i), claims)
			case 2:
				tok = otherIss
			}
			_, err := a.Authenticate(ctx, tok)
			require.ErrorIs(t, err, authn.ErrInvalidJWT)
		}()
	}
	wg.Wait()
	require.Equal(t, 1, is.KeyFetches(), "%d forged tokens fetch nothing within the interval", n)
	require.Equal(t, int64(is.KeyFetches()), o.KeyFetches())

	// A later interval allows one more fetch, however many arrive.
	skew.Add(int64(authn.DefaultJWKSRefresh))
	before := is.KeyFetches()
	for i := range 50 {
		tok, _ := oidctest.SignWith(forger, fmt.Sprintf("kid-late-%d", i), claims)
		_, err := a.Authenticate(ctx, tok)
		require.ErrorIs(t, err, authn.ErrInvalidJWT)
	}
	require.Equal(t, before+1, is.KeyFetches())
	_, err = a.Authenticate(ctx, good)
	require.NoError(t, err, "the real key still verifies")
}

func FuzzParseToken(f *testing.F) {
	tk, _ := authn.Mint()
	f.Add(tk.Token)
	f.Add("oce_")
	f.Add("oce_" + strings.Repeat("a", 32) + "_" + strings.Repeat("A", 43))
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := authn.ParseToken(s)
		if err != nil {
			require.Empty(t, id)
			return
		}
		// Whatever parses has exactly the minted shape.
		require.Len(t, s, authn.TokenLen)
		require.True(t, strings.HasPrefix(s, authn.TokenPrefix+id+"_"))
		require.True(t, authn.LooksMinted(s))
		require.False(t, authn.LooksJWT(s))
	})
}

// TestOIDCExtraAudiencesAndNonce: tokens issued to an extra audience (the
// console's client) are accepted beside the main one, others are not; an
// ID token's nonce must be the login's when one is given.
func TestOIDCExtraAudiencesAndNonce(t *testing.T) {
	is, err := oidctest.New("oce-cli")
	require.NoError(t, err)
	t.Cleanup(is.Close)
	o, err := authn.NewOIDC(authn.OIDCConfig{Issuer: is.URL(), Audience: "oce-cli", ExtraAudiences: []string{"oce-console"}})
	require.NoError(t, err)
	ctx := context.Background()
	for _, tc := range []struct {
		aud, nonce, want string
		err              error
	}{
		{aud: "oce-cli"},
		{aud: "oce-console"},
		{aud: "someone-else", err: authn.ErrInvalidJWT},
		{aud: "oce-console", nonce: "n-1", want: "n-1"},
		{aud: "oce-console", nonce: "n-1", want: "n-2", err: authn.ErrNonce},
		{aud: "oce-console", want: "n-2", err: authn.ErrNonce},
	} {
		tok, err := is.Sign(oidctest.Claims{Subject: "alice", Audience: tc.aud, Nonce: tc.nonce})
		require.NoError(t, err)
		p, err := o.VerifyIDToken(ctx, tok, tc.want)
		if tc.err != nil {
			require.ErrorIs(t, err, tc.err, "%+v", tc)
			continue
		}
		require.NoError(t, err, "%+v", tc)
		require.Equal(t, "user:oidc:alice", p.Actor())
	}
}
