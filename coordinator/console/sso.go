package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"oce.dev/oce/coordinator/authn"
)

// Single sign-on: the OIDC authorization code flow with PKCE (S256).
// /console/sso/start keeps a pending login server-side (state, nonce, PKCE
// verifier, where to go after) under a random state that a short-lived
// cookie binds to the browser, and sends the browser to the provider;
// /console/sso/callback takes the pending login back (once), exchanges the
// code with the verifier, verifies the ID token with the API's verifier
// (issuer, audience = the console's client id, expiry, signature, nonce)
// and starts a session whose bearer toward the API is that ID token: the
// API maps its subject and groups onto role bindings exactly as it does a
// bearer token's. The session is re-validated with the provider's refresh
// grant every RevalidateInterval (the fresh ID token replaces the bearer);
// a refused refresh — account disabled, token revoked — ends it.

// Bounds and lifetimes of single sign-on.
const (
	// RevalidateInterval is how often a session's refresh token is
	// presented to the provider again: a disabled account or a revoked
	// token ends the session at its first request past the interval.
	RevalidateInterval = time.Minute
	// PendingSSOTTL is how long a started login may take at the provider.
	PendingSSOTTL = 10 * time.Minute
	// MaxPendingSSO bounds the pending logins kept server-side: what
	// unauthenticated /console/sso/start requests may store. When it is full
	// of live ones a new login is refused (SSO_BUSY) until some expire.
	MaxPendingSSO = 4096
	// ssoHTTPTimeout bounds one call to the provider.
	ssoHTTPTimeout = 10 * time.Second
	// ssoDiscoveryRetry paces discovery after a failure.
	ssoDiscoveryRetry = 5 * time.Second
)

// SSOCode is the closed set of codes a refused single sign-on shows.
type SSOCode string

// The codes of a refused single sign-on.
const (
	// SSOState: the callback's state is unknown, expired, already used or
	// not this browser's.
	SSOState SSOCode = "SSO_STATE"
	// SSOCodeRefused: the provider refused the code (reused, expired, or the
	// PKCE verifier does not match).
	SSOCodeRefused SSOCode = "SSO_CODE"
	// SSONonce: the ID token's nonce is not the login's.
	SSONonce SSOCode = "SSO_NONCE"
	// SSOIDToken: the ID token is missing or does not verify.
	SSOIDToken SSOCode = "SSO_ID_TOKEN"
	// SSODenied: the provider answered with an error (the user declined,
	// or the request was refused there).
	SSODenied SSOCode = "SSO_DENIED"
	// SSOUnavailable: the provider could not be reached or answered
	// nonsense.
	SSOUnavailable SSOCode = "SSO_PROVIDER_UNAVAILABLE"
	// SSOBusy: too many logins are pending.
	SSOBusy SSOCode = "SSO_BUSY"
	// SSONotAccepted: the API does not accept the provider's ID token (its
	// OIDC issuer or audiences do not include the console's client).
	SSONotAccepted SSOCode = "SSO_NOT_ACCEPTED"
	// SSOSessionEnded: the provider refused to renew the session.
	SSOSessionEnded SSOCode = "SSO_SESSION_ENDED"
	// SSODisabled: single sign-on is not configured.
	SSODisabled SSOCode = "SSO_DISABLED"
)

// SSOConfig configures single sign-on through an OIDC provider.
type SSOConfig struct {
	// Name is the provider's name on the login page ("Sign in with Name").
	Name string
	// Issuer is the provider's issuer URL (discovery names its endpoints).
	Issuer string
	// ClientID and ClientSecret are the console's confidential client. The
	// secret is read from a file by the caller; it never reaches a log.
	ClientID, ClientSecret string
	// RedirectURL is the exact callback URL registered at the provider:
	// <console URL>/console/sso/callback.
	RedirectURL string
	// PostLogoutURL is where the provider sends the browser after its
	// end_session endpoint (registered there); empty sends none.
	PostLogoutURL string
	// Scopes requested besides openid; nil means groups and offline_access
	// (a refresh token is what re-validation presents).
	Scopes []string
	// Verifier checks ID tokens: the API's OIDC verifier configured with
	// Audience = ClientID.
	Verifier *authn.OIDC
	// HTTPClient calls the provider; nil means one with a 10 s timeout.
	HTTPClient *http.Client
	// Revalidate overrides RevalidateInterval (tests).
	Revalidate time.Duration
}

// sso is the console's single sign-on.
type sso struct {
	cfg     SSOConfig
	client  *http.Client
	pending *pendingLogins

	mu       sync.Mutex
	oauth    *oauth2.Config
	endURL   string // end_session_endpoint
	revokeAt string // revocation_endpoint
	failedAt time.Time
	lastErr  error
}

func newSSO(cfg SSOConfig, now func() time.Time) (*sso, error) {
	if cfg.Issuer == "" || cfg.ClientID == "" || cfg.ClientSecret == "" || cfg.RedirectURL == "" || cfg.Verifier == nil {
		return nil, errors.New("console: single sign-on needs an issuer, a client id and secret, a redirect URL and a verifier")
	}
	if u, err := url.Parse(cfg.RedirectURL); err != nil || u.Path != Prefix+"/sso/callback" || u.Host == "" {
		return nil, fmt.Errorf("console: the SSO redirect URL must be <console URL>%s/sso/callback", Prefix)
	}
	if cfg.Name == "" {
		cfg.Name = "single sign-on"
	}
	if cfg.Scopes == nil {
		cfg.Scopes = []string{"groups", oidc.ScopeOfflineAccess}
	}
	if cfg.Revalidate <= 0 {
		cfg.Revalidate = RevalidateInterval
	}
	cl := cfg.HTTPClient
	if cl == nil {
		cl = &http.Client{Timeout: ssoHTTPTimeout}
	}
	return &sso{cfg: cfg, client: cl, pending: newPendingLogins(now)}, nil
}

// endpoints discovers the provider's endpoints (once; after a failure at
// most every ssoDiscoveryRetry).
func (s *sso) endpoints(ctx context.Context) (*oauth2.Config, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.oauth != nil {
		return s.oauth, nil
	}
	if !s.failedAt.IsZero() && time.Since(s.failedAt) < ssoDiscoveryRetry {
		return nil, s.lastErr
	}
	dctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, s.client), ssoHTTPTimeout)
	defer cancel()
	p, err := oidc.NewProvider(dctx, s.cfg.Issuer)
	var meta struct {
		EndSession string `json:"end_session_endpoint"`
		Revocation string `json:"revocation_endpoint"`
	}
	if err == nil {
		err = p.Claims(&meta)
	}
	if err != nil {
		s.failedAt, s.lastErr = time.Now(), fmt.Errorf("console: SSO discovery: %w", err)
		return nil, s.lastErr
	}
	s.oauth = &oauth2.Config{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: s.cfg.RedirectURL, Scopes: append([]string{oidc.ScopeOpenID}, s.cfg.Scopes...)}
	s.endURL, s.revokeAt = meta.EndSession, meta.Revocation
	return s.oauth, nil
}

// ctx carries the provider's HTTP client to oauth2.
func (s *sso) ctx(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, s.client)
}

// pendingLogin is one started login, kept until its callback or expiry.
type pendingLogin struct {
	verifier, nonce, next string
	created               time.Time
}

// pendingLogins is the bounded store of started logins, by state.
type pendingLogins struct {
	mu    sync.Mutex
	m     map[string]pendingLogin
	now   func() time.Time
	swept time.Time
}

func newPendingLogins(now func() time.Time) *pendingLogins {
	return &pendingLogins{m: map[string]pendingLogin{}, now: now}
}

// errPendingFull: MaxPendingSSO live logins are pending.
var errPendingFull = errors.New("console: too many pending single sign-on logins")

func (p *pendingLogins) add(state string, l pendingLogin) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if len(p.m) >= MaxPendingSSO && now.Sub(p.swept) >= time.Second {
		p.swept = now
		for k, v := range p.m {
			if now.Sub(v.created) > PendingSSOTTL {
				delete(p.m, k)
			}
		}
	}
	if len(p.m) >= MaxPendingSSO {
		return errPendingFull
	}
	l.created = now
	p.m[state] = l
	return nil
}

// take removes and returns the live pending login of state.
func (p *pendingLogins) take(state string) (pendingLogin, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.m[state]
	delete(p.m, state)
	if !ok || p.now().Sub(l.created) > PendingSSOTTL {
		return pendingLogin{}, false
	}
	return l, true
}

func (p *pendingLogins) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}

// PendingSSO counts the pending single sign-on logins (tests).
func (c *Console) PendingSSO() int {
	if c.sso == nil {
		return 0
	}
	return c.sso.pending.len()
}

// ssoSession is what a single sign-on session keeps besides its bearer.
// It is shared by the copies sessions.get returns; mu serializes
// re-validations (the provider rotates refresh tokens: two concurrent
// refreshes would spend one token twice).
type ssoSession struct {
	mu        sync.Mutex
	refresh   string
	validated time.Time
}

const cookieSSO = "oce_console_sso" // binds a pending login to its browser

// ssoCookie is SameSite=Lax: the provider's redirect back is a cross-site
// navigation that a Strict cookie would not accompany.
func (c *Console) ssoCookie(r *http.Request, name, value, path string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: path, MaxAge: maxAge, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: c.secure(r)}
}

// ssoFail renders a refused single sign-on: its code, nothing stored.
func (c *Console) ssoFail(w http.ResponseWriter, r *http.Request, status int, code SSOCode, msg string) {
	c.log.Info("console: single sign-on refused", "code", string(code), "status", status)
	w.Header().Set("Cache-Control", "no-store")
	c.render(w, status, "error", nil, struct{ Title, Message, Code string }{"Sign-in failed", msg, string(code)})
}

// ssoStart begins a login at the provider.
func (c *Console) ssoStart(w http.ResponseWriter, r *http.Request) {
	if c.sso == nil {
		c.ssoFail(w, r, http.StatusNotFound, SSODisabled, "Single sign-on is not configured.")
		return
	}
	if ok, wait := c.logins.admit(r); !ok {
		w.Header().Set("Retry-After", fmt.Sprint(retryAfter(wait)))
		c.ssoFail(w, r, http.StatusTooManyRequests, SSOBusy, "Too many sign-in attempts; try again later.")
		return
	}
	oc, err := c.sso.endpoints(r.Context())
	if err != nil {
		c.log.Warn("console: single sign-on provider unavailable", "error", err.Error())
		c.ssoFail(w, r, http.StatusBadGateway, SSOUnavailable, "The sign-in provider cannot be reached; try again later.")
		return
	}
	state, nonce, verifier := randomToken(), randomToken(), oauth2.GenerateVerifier()
	if err := c.sso.pending.add(state, pendingLogin{verifier: verifier, nonce: nonce, next: safeNext(r.URL.Query().Get("next"))}); err != nil {
		w.Header().Set("Retry-After", "60")
		c.ssoFail(w, r, http.StatusServiceUnavailable, SSOBusy, "Too many sign-ins are in progress; try again later.")
		return
	}
	http.SetCookie(w, c.ssoCookie(r, cookieSSO, state, Prefix+"/sso", int(PendingSSOTTL.Seconds())))
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, oc.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce)), http.StatusSeeOther)
}

// ssoCallback completes a login: one use of the pending login, the code
// exchange with its verifier, the ID token's checks, then a session.
func (c *Console) ssoCallback(w http.ResponseWriter, r *http.Request) {
	if c.sso == nil {
		c.ssoFail(w, r, http.StatusNotFound, SSODisabled, "Single sign-on is not configured.")
		return
	}
	q := r.URL.Query()
	state := q.Get("state")
	ck, err := r.Cookie(cookieSSO)
	http.SetCookie(w, c.ssoCookie(r, cookieSSO, "", Prefix+"/sso", -1))
	// The state must be this browser's: a callback URL from someone else's
	// login (login CSRF) finds no matching cookie.
	if err != nil || !equal(ck.Value, state) {
		c.logins.failed(r)
		c.ssoFail(w, r, http.StatusBadRequest, SSOState, "This sign-in was not started in this browser, or it expired; start again.")
		return
	}
	pl, ok := c.sso.pending.take(state)
	if !ok {
		c.logins.failed(r)
		c.ssoFail(w, r, http.StatusBadRequest, SSOState, "This sign-in is unknown, expired or already completed; start again.")
		return
	}
	if e := q.Get("error"); e != "" {
		c.ssoFail(w, r, http.StatusForbidden, SSODenied, "The sign-in provider refused the sign-in ("+errorName(e)+").")
		return
	}
	oc, err := c.sso.endpoints(r.Context())
	if err != nil {
		c.ssoFail(w, r, http.StatusBadGateway, SSOUnavailable, "The sign-in provider cannot be reached; try again later.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), ssoHTTPTimeout)
	defer cancel()
	tok, err := oc.Exchange(c.sso.ctx(ctx), q.Get("code"), oauth2.VerifierOption(pl.verifier))
	var re *oauth2.RetrieveError
	switch {
	case errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500:
		c.logins.failed(r)
		c.ssoFail(w, r, http.StatusBadRequest, SSOCodeRefused, "The sign-in provider refused the code; start again.")
		return
	case err != nil:
		c.log.Warn("console: single sign-on code exchange failed", "error", err.Error())
		c.ssoFail(w, r, http.StatusBadGateway, SSOUnavailable, "The sign-in provider cannot be reached; try again later.")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		c.ssoFail(w, r, http.StatusBadGateway, SSOIDToken, "The sign-in provider returned no ID token.")
		return
	}
	ip, err := c.sso.cfg.Verifier.VerifyIDToken(ctx, raw, pl.nonce)
	switch {
	case errors.Is(err, authn.ErrNonce):
		c.logins.failed(r)
		c.ssoFail(w, r, http.StatusBadRequest, SSONonce, "The ID token does not belong to this sign-in.")
		return
	case err != nil:
		c.logins.failed(r)
		c.log.Info("console: single sign-on ID token refused", "error", err.Error())
		c.ssoFail(w, r, http.StatusBadRequest, SSOIDToken, "The ID token is not valid.")
		return
	}
	// The API names the session's principal, as for a token login; it must
	// accept the ID token, since every call of the session presents it.
	p, err := c.cfg.Authenticator.Authenticate(ctx, raw)
	if err != nil || p.Name != ip.Actor() {
		c.log.Warn("console: the API does not accept the single sign-on ID token; add the console's client id to its OIDC audiences", "actor", p.Name, "error", fmt.Sprint(err))
		c.ssoFail(w, r, http.StatusForbidden, SSONotAccepted, "The coordinator does not accept this sign-in provider's tokens.")
		return
	}
	if len(p.Roles) == 0 {
		p.Roles = ip.Groups
	}
	s, err := c.sessions.create(p, raw)
	if err != nil {
		w.Header().Set("Retry-After", "60")
		c.ssoFail(w, r, http.StatusServiceUnavailable, SSOBusy, "Too many sessions are open; try again later.")
		return
	}
	c.sessions.update(s.id, func(ss *session) {
		ss.sso = &ssoSession{refresh: tok.RefreshToken, validated: c.cfg.Now()}
	})
	// Lax: the browser arrives here from the provider's site, and the
	// redirect that follows must carry the new session.
	http.SetCookie(w, c.ssoCookie(r, cookieSession, s.id, cookiePath, int(c.cfg.SessionMax.Seconds())))
	c.log.Info("console: login", "user", p.Name, "via", "sso")
	http.Redirect(w, r, pl.next, http.StatusSeeOther)
}

// errorName keeps a provider's error code to its closed OAuth 2.0 form.
func errorName(e string) string {
	known := []string{"access_denied", "invalid_request", "unauthorized_client", "unsupported_response_type",
		"invalid_scope", "server_error", "temporarily_unavailable", "login_required", "consent_required",
		"interaction_required", "account_selection_required"}
	if slices.Contains(known, e) {
		return e
	}
	return "error"
}

// errSSOEnded: the provider refused to renew a single sign-on session.
var errSSOEnded = errors.New("console: the provider refused to renew the session")

// revalidate renews a single sign-on session with the provider when
// RevalidateInterval has passed since it last did, and returns the
// session as it now is. A refused refresh grant ends the session
// (errSSOEnded); an unreachable provider keeps it until the ID token the
// API checks expires, retrying at the next interval.
func (c *Console) revalidate(ctx context.Context, s *session) (*session, error) {
	st := s.sso
	if st == nil || c.sso == nil {
		return s, nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	now := c.cfg.Now()
	if now.Sub(st.validated) < c.sso.cfg.Revalidate {
		if cur, ok := c.sessions.get(s.id); ok {
			return cur, nil // another request may have renewed it meanwhile
		}
		return nil, errSSOEnded
	}
	oc, err := c.sso.endpoints(ctx)
	if err != nil {
		st.validated = now
		c.log.Warn("console: single sign-on provider unavailable; the session is kept until its ID token expires", "error", err.Error())
		return s, nil
	}
	ctx, cancel := context.WithTimeout(ctx, ssoHTTPTimeout)
	defer cancel()
	tok, err := oc.TokenSource(c.sso.ctx(ctx), &oauth2.Token{RefreshToken: st.refresh, Expiry: time.Unix(1, 0)}).Token()
	var re *oauth2.RetrieveError
	switch {
	case errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500:
		c.sessions.remove(s.id)
		c.log.Info("console: single sign-on session ended: the provider refused to renew it", "user", s.principal.Name)
		return nil, errSSOEnded
	case err != nil:
		st.validated = now
		c.log.Warn("console: single sign-on renewal failed; the session is kept until its ID token expires", "error", err.Error())
		return s, nil
	}
	raw, _ := tok.Extra("id_token").(string)
	var groups []string
	if raw != "" {
		ip, err := c.sso.cfg.Verifier.VerifyIDToken(ctx, raw, "")
		if err != nil || ip.Actor() != s.principal.Name {
			c.sessions.remove(s.id)
			c.log.Warn("console: single sign-on session ended: the renewed ID token is not valid or names another user")
			return nil, errSSOEnded
		}
		groups = ip.Groups
	}
	st.validated = now
	if tok.RefreshToken != "" {
		st.refresh = tok.RefreshToken
	}
	c.sessions.update(s.id, func(ss *session) {
		if raw != "" {
			ss.token = raw
			ss.principal.Roles = groups
		}
	})
	if cur, ok := c.sessions.get(s.id); ok {
		return cur, nil
	}
	return nil, errSSOEnded
}

// ssoLogout revokes the session's refresh token at the provider (best
// effort) and returns where the browser goes: the provider's
// end_session_endpoint when it has one, else the login page. The ID token
// is not sent as id_token_hint: it is the session's bearer toward the API
// and a URL would put it in the browser's history.
func (c *Console) ssoLogout(ctx context.Context, s *session) string {
	st := s.sso
	if st == nil || c.sso == nil {
		return Prefix + "/login"
	}
	if _, err := c.sso.endpoints(ctx); err != nil {
		return Prefix + "/login"
	}
	c.sso.mu.Lock()
	revokeAt, endURL := c.sso.revokeAt, c.sso.endURL
	c.sso.mu.Unlock()
	st.mu.Lock()
	refresh := st.refresh
	st.mu.Unlock()
	if revokeAt != "" && refresh != "" {
		if err := c.sso.revoke(ctx, revokeAt, refresh); err != nil {
			c.log.Warn("console: revoking the single sign-on refresh token failed", "error", err.Error())
		}
	}
	if endURL == "" {
		return Prefix + "/login"
	}
	u, err := url.Parse(endURL)
	if err != nil {
		return Prefix + "/login"
	}
	v := u.Query()
	v.Set("client_id", c.sso.cfg.ClientID)
	if c.sso.cfg.PostLogoutURL != "" {
		v.Set("post_logout_redirect_uri", c.sso.cfg.PostLogoutURL)
	}
	u.RawQuery = v.Encode()
	return u.String()
}

// revoke posts RFC 7009's revocation of a refresh token.
func (s *sso) revoke(ctx context.Context, endpoint, token string) error {
	ctx, cancel := context.WithTimeout(ctx, ssoHTTPTimeout)
	defer cancel()
	form := url.Values{"token": {token}, "token_type_hint": {"refresh_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(s.cfg.ClientID), url.QueryEscape(s.cfg.ClientSecret))
	res, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("console: revocation: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("console: revocation: %s", res.Status)
	}
	return nil
}
