// Package authn authenticates API callers: the shared bootstrap token (a
// cluster-admin identity), API tokens the coordinator mints (stored only as
// SHA-256 hashes, compared in constant time, with expiry and revocation),
// and, when an issuer is configured, OIDC bearer JWTs (oidc.go). Its
// middleware puts the authenticated iam.Principal in the request context,
// where the API (and the web console) read it.
package authn

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"time"

	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
)

// Errors of authentication; every one answers 401.
var (
	ErrNoCredentials = errors.New("authn: no bearer token")
	ErrUnknownToken  = errors.New("authn: unknown token")
	ErrTokenExpired  = errors.New("authn: token expired")
	ErrTokenRevoked  = errors.New("authn: token revoked")
	ErrNoPrincipal   = errors.New("authn: the token's principal no longer exists")
	ErrInvalidJWT    = errors.New("authn: invalid OIDC token")
)

// Config configures an Authenticator.
type Config struct {
	// Bootstrap is the shared bootstrap token; "" accepts none.
	Bootstrap string
	// Machine holds the minted tokens' records.
	Machine *state.Machine
	// OIDC verifies bearer JWTs; nil accepts none.
	OIDC *OIDC
	// Clock is the time tokens expire against; nil means time.Now.
	Clock func() time.Time
}

// Authenticator turns a request's bearer credential into a principal.
type Authenticator struct {
	cfg       Config
	bootstrap [sha256.Size]byte
}

// New returns an Authenticator.
func New(cfg Config) *Authenticator {
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	a := &Authenticator{cfg: cfg}
	if cfg.Bootstrap != "" {
		a.bootstrap = sha256.Sum256([]byte(cfg.Bootstrap))
	}
	return a
}

// BearerToken returns the request's bearer token.
func BearerToken(r *http.Request) (string, bool) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return strings.TrimSpace(tok), ok && strings.TrimSpace(tok) != ""
}

// Authenticate returns the principal of a bearer token.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (iam.Principal, error) {
	switch {
	case token == "":
		return iam.Principal{}, ErrNoCredentials
	case LooksMinted(token):
		return a.minted(token)
	case a.cfg.OIDC != nil && LooksJWT(token):
		return a.cfg.OIDC.Verify(ctx, token)
	case a.cfg.Bootstrap != "":
		// Comparing digests keeps the comparison constant-time whatever the
		// presented token's length.
		got := sha256.Sum256([]byte(token))
		if subtle.ConstantTimeCompare(got[:], a.bootstrap[:]) == 1 {
			return iam.Principal{Kind: iam.KindBootstrap, Name: iam.BootstrapActor}, nil
		}
	}
	return iam.Principal{}, ErrUnknownToken
}

// minted authenticates a token the coordinator minted.
func (a *Authenticator) minted(token string) (iam.Principal, error) {
	id, err := ParseToken(token)
	if err != nil {
		return iam.Principal{}, ErrUnknownToken
	}
	m := a.cfg.Machine
	rec, ok := m.Token(id)
	want, herr := hex.DecodeString(rec.Hash)
	got := sha256.Sum256([]byte(token))
	if !ok || herr != nil || subtle.ConstantTimeCompare(got[:], want) != 1 {
		return iam.Principal{}, ErrUnknownToken
	}
	switch {
	case !rec.RevokedAt.IsZero():
		return iam.Principal{}, ErrTokenRevoked
	case !a.cfg.Clock().Before(rec.ExpiresAt):
		return iam.Principal{}, ErrTokenExpired
	}
	switch rec.PrincipalKind {
	case state.PrincipalUser:
		u, ok := m.User(rec.PrincipalID)
		if !ok {
			return iam.Principal{}, ErrNoPrincipal
		}
		return iam.Principal{Kind: iam.KindUser, Name: u.Name, ID: u.ID, Groups: u.Groups, TokenID: rec.ID}, nil
	case state.PrincipalServicePrincipal:
		sp, ok := m.ServicePrincipal(rec.PrincipalID)
		if !ok {
			return iam.Principal{}, ErrNoPrincipal
		}
		ns, ok := m.Namespace(sp.NamespaceID)
		if !ok {
			return iam.Principal{}, ErrNoPrincipal
		}
		return iam.Principal{Kind: iam.KindServicePrincipal, Name: sp.Name, ID: sp.ID, Namespace: ns.Name, TokenID: rec.ID}, nil
	}
	return iam.Principal{}, ErrNoPrincipal
}

type principalKey struct{}

// WithPrincipal returns ctx carrying the authenticated principal.
func WithPrincipal(ctx context.Context, p iam.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal the middleware authenticated.
func PrincipalFrom(ctx context.Context) (iam.Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(iam.Principal)
	return p, ok
}

// Middleware authenticates every request, putting the principal in its
// context; a request without a valid credential goes to reject instead.
func (a *Authenticator) Middleware(next http.Handler, reject func(w http.ResponseWriter, r *http.Request, err error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := BearerToken(r)
		p, err := a.Authenticate(r.Context(), tok)
		if err != nil {
			reject(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}
