package console_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
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
	"oce.dev/oce/coordinator/console"
	"oce.dev/oce/shared/logtest"
)

const (
	ssoClientID = "oce-console"
	ssoSecret   = "sso-client-secret-planted-7f3a9c"
	// ssoRevalidate is the revalidation interval the tests inject; the
	// fixture's clock is moved past it instead of sleeping.
	ssoRevalidate = 5 * time.Minute
)

// ssoFixture is the API and the console with single sign-on through an
// oidctest issuer, on a clock the test moves.
type ssoFixture struct {
	*fixture
	is   *oidctest.Issuer
	c    *console.Console
	logs *logtest.Buffer

	mu  sync.Mutex
	now time.Time
}

func newSSOFixture(t *testing.T) *ssoFixture {
	t.Helper()
	is, err := oidctest.New("oce-cli")
	require.NoError(t, err)
	t.Cleanup(is.Close)
	f := &ssoFixture{is: is, logs: &logtest.Buffer{}, now: time.Now()}
	var h http.Handler = http.NotFoundHandler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	redirect := srv.URL + "/console/sso/callback"
	is.EnableCodeFlow(ssoClientID, ssoSecret, redirect)
	is.LoginAs("alice", []string{"ops"})

	b := apitest.New()
	// the API accepts the CLI's audience and the console's client id
	apiOIDC, err := authn.NewOIDC(authn.OIDCConfig{Issuer: is.URL(), Audience: "oce-cli", ExtraAudiences: []string{ssoClientID}})
	require.NoError(t, err)
	apiH := api.New(api.Config{Token: adminToken, Authenticator: authn.New(authn.Config{Bootstrap: adminToken, Machine: b.M, OIDC: apiOIDC}),
		Metrics: prometheus.NewRegistry(), WithActor: apitest.WithActor}, b)
	verifier, err := authn.NewOIDC(authn.OIDCConfig{Issuer: is.URL(), Audience: ssoClientID})
	require.NoError(t, err)
	f.c, err = console.New(console.Config{API: apiH, Now: f.clock, Log: slog.New(slog.NewTextHandler(f.logs, nil)),
		SSO: &console.SSOConfig{Name: "Test IdP", Issuer: is.URL(), ClientID: ssoClientID, ClientSecret: ssoSecret,
			RedirectURL: redirect, PostLogoutURL: srv.URL + "/console/login", Verifier: verifier, Revalidate: ssoRevalidate}})
	require.NoError(t, err)
	h = console.Mount(apiH, f.c)
	f.fixture = &fixture{t: t, b: b, srv: srv}
	t.Cleanup(func() {
		require.NotContains(t, f.logs.String(), ssoSecret, "the client secret reached the console's log")
	})
	return f
}

func (f *ssoFixture) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *ssoFixture) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// abs fetches an absolute URL (the issuer's) in the browser.
func (b *browser) abs(u string) page {
	b.f.t.Helper()
	res, err := b.c.Get(u)
	require.NoError(b.f.t, err)
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return page{res.StatusCode, string(body), res.Header}
}

// start begins a login and returns the provider's authorize URL.
func (b *browser) start() *url.URL {
	b.f.t.Helper()
	p := b.get("/console/sso/start?next=/console/ns/team")
	require.Equal(b.f.t, http.StatusSeeOther, p.status, p.body)
	u, err := url.Parse(p.header.Get("Location"))
	require.NoError(b.f.t, err)
	return u
}

// authorize signs in at the provider and returns the callback path.
func (b *browser) authorize(u *url.URL) string {
	b.f.t.Helper()
	p := b.abs(u.String())
	require.Equal(b.f.t, http.StatusFound, p.status, p.body)
	cb, err := url.Parse(p.header.Get("Location"))
	require.NoError(b.f.t, err)
	return cb.RequestURI()
}

// ssoLogin signs in through the provider and returns the session's CSRF
// token.
func (b *browser) ssoLogin() string {
	b.f.t.Helper()
	p := b.get(b.authorize(b.start()))
	require.Equal(b.f.t, http.StatusSeeOther, p.status, p.body)
	require.Equal(b.f.t, "/console/ns/team", p.header.Get("Location"))
	home := b.get("/console/")
	require.Equal(b.f.t, http.StatusOK, home.status)
	require.Contains(b.f.t, home.body, "user:oidc:alice")
	return csrfOf(b.f.t, home)
}

func (b *browser) signedIn() bool {
	b.f.t.Helper()
	return b.get("/console/").status == http.StatusOK
}

func TestSSOLoginAndLogout(t *testing.T) {
	f := newSSOFixture(t)
	b := f.browser()

	lp := b.get("/console/login")
	require.Contains(t, lp.body, "Sign in with Test IdP")
	// logout's answer redirects to the provider: its origin is a form-action
	require.Contains(t, lp.header.Get("Content-Security-Policy"), "form-action 'self' "+f.is.URL()+";")
	require.Contains(t, lp.body, `id="login-form"`, "the token login stays for break-glass")

	authz := b.start()
	q := authz.Query()
	require.Equal(t, f.is.URL()+"/authorize", authz.Scheme+"://"+authz.Host+authz.Path)
	require.Equal(t, ssoClientID, q.Get("client_id"))
	require.Equal(t, f.srv.URL+"/console/sso/callback", q.Get("redirect_uri"))
	require.Equal(t, "S256", q.Get("code_challenge_method"))
	require.Len(t, q.Get("code_challenge"), 43)
	require.NotEmpty(t, q.Get("nonce"))
	require.NotEmpty(t, q.Get("state"))
	require.ElementsMatch(t, []string{"openid", "groups", "offline_access"}, strings.Fields(q.Get("scope")))
	require.Equal(t, 1, f.c.PendingSSO())

	res, err := b.c.Get(f.srv.URL + b.authorize(authz))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/console/ns/team", res.Header.Get("Location"))
	require.Equal(t, 0, f.c.PendingSSO(), "a completed login leaves nothing pending")
	var sess *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "oce_console" {
			sess = c
		}
	}
	require.NotNil(t, sess)
	require.True(t, sess.HttpOnly)
	require.Equal(t, http.SameSiteLaxMode, sess.SameSite)

	home := b.get("/console/")
	require.Equal(t, http.StatusOK, home.status)
	require.Contains(t, home.body, "user:oidc:alice")

	// logout: the session ends, the refresh token is revoked, and the
	// browser goes on to the provider's end_session endpoint without the
	// ID token in the URL
	out := b.post("/console/logout", url.Values{"csrf": {csrfOf(t, home)}})
	require.Equal(t, http.StatusSeeOther, out.status)
	end, err := url.Parse(out.header.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, f.is.URL()+"/end_session", end.Scheme+"://"+end.Host+end.Path)
	require.Equal(t, ssoClientID, end.Query().Get("client_id"))
	require.Equal(t, f.srv.URL+"/console/login", end.Query().Get("post_logout_redirect_uri"))
	require.Empty(t, end.Query().Get("id_token_hint"))
	require.Equal(t, 1, f.is.Revocations())
	require.False(t, b.signedIn())

	// and signs in again
	b.ssoLogin()
}

func TestSSORefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		run    func(f *ssoFixture, b *browser) page
		status int
		code   console.SSOCode
	}{
		{name: "state of another browser", status: http.StatusBadRequest, code: console.SSOState,
			run: func(f *ssoFixture, b *browser) page {
				cb := f.browser().authorize(f.browser().start()) // someone else's login
				b.start()
				return b.get(cb)
			}},
		{name: "no state cookie", status: http.StatusBadRequest, code: console.SSOState,
			run: func(f *ssoFixture, b *browser) page {
				cb := b.authorize(b.start())
				return f.browser().get(cb)
			}},
		{name: "state used twice", status: http.StatusBadRequest, code: console.SSOState,
			run: func(f *ssoFixture, b *browser) page {
				a := f.browser()
				cb := a.authorize(a.start())
				require.Equal(f.t, http.StatusSeeOther, a.get(cb).status)
				// the callback replayed with the first browser's state cookie
				u, _ := url.Parse(f.srv.URL)
				q, _ := url.ParseQuery(strings.SplitN(cb, "?", 2)[1])
				b.c.Jar.SetCookies(u, []*http.Cookie{{Name: "oce_console_sso", Value: q.Get("state"), Path: "/console/sso"}})
				return b.get(cb)
			}},
		{name: "code of another login (PKCE)", status: http.StatusBadRequest, code: console.SSOCodeRefused,
			run: func(f *ssoFixture, b *browser) page {
				other, _ := url.ParseQuery(strings.SplitN(f.browser().authorize(f.browser().start()), "?", 2)[1])
				mine, _ := url.ParseQuery(strings.SplitN(b.authorize(b.start()), "?", 2)[1])
				return b.get("/console/sso/callback?" + url.Values{"code": other["code"], "state": mine["state"]}.Encode())
			}},
		{name: "nonce of another login", status: http.StatusBadRequest, code: console.SSONonce,
			run: func(f *ssoFixture, b *browser) page {
				f.is.ForgeNonce("a-nonce-of-another-login")
				return b.get(b.authorize(b.start()))
			}},
		{name: "provider refuses", status: http.StatusForbidden, code: console.SSODenied,
			run: func(f *ssoFixture, b *browser) page {
				f.is.LoginAs("", nil)
				return b.get(b.authorize(b.start()))
			}},
		{name: "provider down", status: http.StatusBadGateway, code: console.SSOUnavailable,
			run: func(f *ssoFixture, b *browser) page {
				f.is.Close()
				return b.get("/console/sso/start")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newSSOFixture(t)
			b := f.browser()
			p := tc.run(f, b)
			require.Equal(t, tc.status, p.status, p.body)
			require.Contains(t, p.body, `<code id="error-code">`+string(tc.code)+`</code>`)
			require.False(t, b.signedIn(), "a refused sign-in starts no session")
			require.LessOrEqual(t, f.c.PendingSSO(), 2, "a refused callback leaves its own login no longer pending")
		})
	}
}

// The code-reuse case's first redemption, spelled out: a second callback
// with the same code is refused even though its state is fresh.
func TestSSOCodeReuseRefused(t *testing.T) {
	f := newSSOFixture(t)
	b := f.browser()
	first, err := url.ParseQuery(strings.SplitN(b.authorize(b.start()), "?", 2)[1])
	require.NoError(t, err)
	require.Equal(t, http.StatusSeeOther, b.get("/console/sso/callback?"+first.Encode()).status)
	b2 := f.browser()
	fresh, err := url.ParseQuery(strings.SplitN(b2.authorize(b2.start()), "?", 2)[1])
	require.NoError(t, err)
	p := b2.get("/console/sso/callback?" + url.Values{"code": first["code"], "state": fresh["state"]}.Encode())
	require.Equal(t, http.StatusBadRequest, p.status)
	require.Contains(t, p.body, string(console.SSOCodeRefused))
	require.False(t, b2.signedIn())
}

func TestSSORevalidationEndsDisabledAccount(t *testing.T) {
	f := newSSOFixture(t)
	b := f.browser()
	b.ssoLogin()

	// within the interval the provider is not asked
	f.advance(ssoRevalidate - time.Second)
	require.True(t, b.signedIn())
	require.Equal(t, 0, f.is.Refreshes())

	// past it the refresh grant renews the session (its token rotates)
	f.advance(2 * time.Second)
	require.True(t, b.signedIn())
	require.Equal(t, 1, f.is.Refreshes())
	require.True(t, b.signedIn())
	require.Equal(t, 1, f.is.Refreshes(), "renewed once per interval")

	// the account is disabled: the next renewal is refused and the session
	// ends at the first request past the interval
	f.is.Disable("alice")
	require.True(t, b.signedIn(), "still within the interval")
	f.advance(ssoRevalidate)
	p := b.get("/console/ns/team")
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Equal(t, "/console/login?ended="+string(console.SSOSessionEnded), p.header.Get("Location"))
	require.Contains(t, b.get(p.header.Get("Location")).body, string(console.SSOSessionEnded))
	require.False(t, b.signedIn())
}

func TestSSOBreakGlassTokenLogin(t *testing.T) {
	f := newSSOFixture(t)
	b := f.browser()
	b.login(adminToken)
	home := b.get("/console/")
	require.Equal(t, http.StatusOK, home.status)
	require.Contains(t, home.body, "bootstrap")
}

func TestSSOStartIsRateLimited(t *testing.T) {
	f := newSSOFixture(t)
	b := f.browser()
	status := 0
	for i := 0; i < 40 && status != http.StatusTooManyRequests; i++ {
		status = b.get("/console/sso/start").status
	}
	require.Equal(t, http.StatusTooManyRequests, status)
	require.LessOrEqual(t, f.c.PendingSSO(), 20, "a source may store at most its burst of pending logins")
}
