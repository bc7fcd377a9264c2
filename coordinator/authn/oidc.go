package authn

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
)

// OIDCConfig configures bearer JWTs from one issuer.
type OIDCConfig struct {
	// Issuer is the issuer URL (its discovery document names the JWKS).
	Issuer string
	// Audience is the expected aud (the client id tokens are issued to).
	Audience string
	// ExtraAudiences are further client ids whose tokens are accepted (the
	// console's single sign-on client: its sessions call the API with the
	// ID tokens the provider issued to it).
	ExtraAudiences []string
	// UsernameClaim names the claim that becomes the user name (default
	// "sub"); GroupsClaim the string-array claim of groups (default
	// "groups"). Both get iam.ExternalPrefix.
	UsernameClaim string
	GroupsClaim   string
	// CAFile is a PEM bundle trusted for the issuer's TLS (default: the
	// system roots).
	CAFile string
	// Clock checks expiry and paces key set fetches; nil means time.Now.
	Clock func() time.Time
	// JWKSRefresh is the least time between two fetches of the issuer's
	// key set (keyset.go); zero means DefaultJWKSRefresh.
	JWKSRefresh time.Duration
}

// Defaults of OIDC claims.
const (
	DefaultUsernameClaim = "sub"
	DefaultGroupsClaim   = "groups"
	// discoveryRetry paces discovery attempts after a failure, so an
	// unreachable issuer is not asked on every request.
	discoveryRetry  = 5 * time.Second
	oidcHTTPTimeout = 10 * time.Second
)

// OIDC verifies bearer JWTs: issuer, audience and expiry, then the
// signature against the issuer's key set, which is fetched again when a
// token names a key it has not seen — at most once per JWKSRefresh
// (keyset.go), so the issuer can rotate keys and forged tokens cannot make
// the coordinator call it.
type OIDC struct {
	cfg    OIDCConfig
	client *http.Client

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
	keys     *keySet
	failedAt time.Time
	lastErr  error
}

// NewOIDC returns a verifier; discovery happens on first use.
func NewOIDC(cfg OIDCConfig) (*OIDC, error) {
	if cfg.Issuer == "" || cfg.Audience == "" {
		return nil, errors.New("authn: OIDC needs an issuer and an audience")
	}
	if cfg.UsernameClaim == "" {
		cfg.UsernameClaim = DefaultUsernameClaim
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = DefaultGroupsClaim
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.JWKSRefresh <= 0 {
		cfg.JWKSRefresh = DefaultJWKSRefresh
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("authn: OIDC CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("authn: OIDC CA file %s holds no certificate", cfg.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &OIDC{cfg: cfg, client: &http.Client{Transport: tr, Timeout: oidcHTTPTimeout}}, nil
}

// Config returns the configuration (occ's login reads issuer and audience
// from the API).
func (o *OIDC) Config() OIDCConfig { return o.cfg }

func (o *OIDC) verifierFor() (*oidc.IDTokenVerifier, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.verifier != nil {
		return o.verifier, nil
	}
	if !o.failedAt.IsZero() && time.Since(o.failedAt) < discoveryRetry {
		return nil, o.lastErr
	}
	dctx, cancel := context.WithTimeout(oidc.ClientContext(context.Background(), o.client), oidcHTTPTimeout)
	defer cancel()
	p, err := oidc.NewProvider(dctx, o.cfg.Issuer)
	var meta struct {
		JWKS string   `json:"jwks_uri"`
		Algs []string `json:"id_token_signing_alg_values_supported"`
	}
	if err == nil {
		err = p.Claims(&meta)
	}
	if err == nil && meta.JWKS == "" {
		err = errors.New("the discovery document names no jwks_uri")
	}
	if err != nil {
		o.failedAt, o.lastErr = time.Now(), fmt.Errorf("%w: discovery: %w", ErrInvalidJWT, err)
		return nil, o.lastErr
	}
	o.keys = newKeySet(meta.JWKS, o.client, o.cfg.JWKSRefresh, o.cfg.Clock, meta.Algs)
	// go-oidc checks one client id; with extra audiences Verify checks them
	o.verifier = oidc.NewVerifier(o.cfg.Issuer, o.keys, &oidc.Config{ClientID: o.cfg.Audience, Now: o.cfg.Clock,
		SupportedSigningAlgs: meta.Algs, SkipClientIDCheck: len(o.cfg.ExtraAudiences) > 0})
	return o.verifier, nil
}

// HTTPClient is the client that calls the issuer (its CA file applied).
func (o *OIDC) HTTPClient() *http.Client { return o.client }

// KeyFetches counts the fetches of the issuer's key set so far.
func (o *OIDC) KeyFetches() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.keys == nil {
		return 0
	}
	return o.keys.fetches.Load()
}

// ErrNonce: an ID token's nonce is not the one its login sent.
var ErrNonce = errors.New("authn: the ID token's nonce does not match the login's")

// Verify authenticates a bearer JWT.
func (o *OIDC) Verify(ctx context.Context, raw string) (iam.Principal, error) {
	return o.VerifyIDToken(ctx, raw, "")
}

// VerifyIDToken authenticates an ID token as Verify does and, when nonce is
// not empty, requires its nonce claim to equal it (ErrNonce): the check of
// an ID token a login's code exchange returned.
func (o *OIDC) VerifyIDToken(ctx context.Context, raw, nonce string) (iam.Principal, error) {
	v, err := o.verifierFor()
	if err != nil {
		return iam.Principal{}, err
	}
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		var exp *oidc.TokenExpiredError
		if errors.As(err, &exp) {
			return iam.Principal{}, ErrTokenExpired
		}
		return iam.Principal{}, fmt.Errorf("%w: %w", ErrInvalidJWT, err)
	}
	if len(o.cfg.ExtraAudiences) > 0 && !o.audienceAccepted(tok.Audience) {
		return iam.Principal{}, fmt.Errorf("%w: audience %v not accepted", ErrInvalidJWT, tok.Audience)
	}
	if nonce != "" && subtle.ConstantTimeCompare([]byte(tok.Nonce), []byte(nonce)) != 1 {
		return iam.Principal{}, ErrNonce
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return iam.Principal{}, fmt.Errorf("%w: claims: %w", ErrInvalidJWT, err)
	}
	return o.principal(claims)
}

func (o *OIDC) audienceAccepted(aud []string) bool {
	for _, a := range aud {
		if a == o.cfg.Audience || slices.Contains(o.cfg.ExtraAudiences, a) {
			return true
		}
	}
	return false
}

// principal maps verified claims onto a user with groups.
func (o *OIDC) principal(claims map[string]any) (iam.Principal, error) {
	name, _ := claims[o.cfg.UsernameClaim].(string)
	if name == "" || !state.ValidGroupName(iam.ExternalPrefix+name) {
		return iam.Principal{}, fmt.Errorf("%w: claim %q is missing or malformed", ErrInvalidJWT, o.cfg.UsernameClaim)
	}
	p := iam.Principal{Kind: iam.KindUser, Name: iam.ExternalPrefix + name, External: true}
	if raw, ok := claims[o.cfg.GroupsClaim]; ok {
		list, ok := raw.([]any)
		if !ok || len(list) > state.MaxGroups {
			return iam.Principal{}, fmt.Errorf("%w: claim %q is not a list of at most %d groups", ErrInvalidJWT, o.cfg.GroupsClaim, state.MaxGroups)
		}
		for _, g := range list {
			s, ok := g.(string)
			if !ok || !state.ValidGroupName(iam.ExternalPrefix+s) {
				return iam.Principal{}, fmt.Errorf("%w: group %v is malformed", ErrInvalidJWT, g)
			}
			p.Groups = append(p.Groups, iam.ExternalPrefix+s)
		}
	}
	return p, nil
}
