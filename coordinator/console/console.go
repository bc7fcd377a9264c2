// Package console is the operators' web console, served by the coordinator
// under /console on the API's own listener (same TLS, no second server).
// Pages are rendered on the server with html/template; the little
// JavaScript there is (live deploy progress over server-sent events) is a
// static file embedded in the binary, allowed by a strict
// Content-Security-Policy that permits no inline script or style.
//
// The console is a client of the coordinator API: it calls the API handler
// in process with the token the user logged in with (kept server-side in the
// session, never in a URL or a page), so every read and write is
// authenticated and authorized by the API itself. Login is a POST form; the
// session cookie is HttpOnly, SameSite=Strict (Secure under TLS) and every
// form carries a per-session CSRF token.
package console

import (
	"embed"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Prefix is where the console is served.
const Prefix = "/console"

// Config configures the console.
type Config struct {
	// API is the coordinator API handler the console calls in process.
	API http.Handler
	// Authenticator checks the token a user logs in with; nil means
	// APIAuthenticator (whatever the API accepts; TokenAuthenticator when
	// Token is set).
	Authenticator Authenticator
	// Authorizer decides what pages offer in place of the API; nil asks
	// the API (GET …/access), whose IAMDriver decides.
	Authorizer Authorizer
	// Token is the coordinator's bearer token (TokenAuthenticator).
	Token string
	// Secure marks cookies Secure even when the request did not arrive over
	// TLS (a TLS-terminating proxy); under TLS they always are.
	Secure bool
	// SessionIdle and SessionMax override the session lifetimes.
	SessionIdle, SessionMax time.Duration
	// ProgressInterval is how often live progress re-reads the Agent
	// (default 250 ms); ProgressMax bounds one progress stream.
	ProgressInterval, ProgressMax time.Duration
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// Log receives one record per refused request; nil discards.
	Log *slog.Logger
	// SSO, when set, offers single sign-on through an OIDC provider
	// beside the token login (sso.go).
	SSO *SSOConfig
}

// Console is the console's http.Handler.
type Console struct {
	cfg      Config
	sessions *sessions
	logins   *loginLimits // limits.go
	sso      *sso         // nil without single sign-on
	pages    map[string]*template.Template
	static   http.Handler
	mux      *http.ServeMux
	log      *slog.Logger
	csp      string // the Content-Security-Policy of every answer
}

// New returns the console handler; it serves paths under Prefix.
func New(cfg Config) (*Console, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Authenticator == nil {
		cfg.Authenticator = APIAuthenticator{API: cfg.API}
		if cfg.Token != "" {
			cfg.Authenticator = TokenAuthenticator{Token: cfg.Token}
		}
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = SessionIdle
	}
	if cfg.SessionMax <= 0 {
		cfg.SessionMax = SessionMax
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = 250 * time.Millisecond
	}
	if cfg.ProgressMax <= 0 {
		cfg.ProgressMax = 15 * time.Minute
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	static, _ := fs.Sub(assets, "static")
	c := &Console{cfg: cfg, sessions: newSessions(cfg.Now, cfg.SessionIdle, cfg.SessionMax), logins: newLoginLimits(cfg.Now), pages: pages,
		static: http.StripPrefix(Prefix+"/static/", http.FileServer(http.FS(static))), log: log}
	if cfg.SSO != nil {
		if c.sso, err = newSSO(*cfg.SSO, cfg.Now); err != nil {
			return nil, err
		}
	}
	// Logout is a form whose answer redirects to the provider's
	// end_session endpoint: form-action must allow the provider's origin.
	formAction := "'self'"
	if c.sso != nil {
		if u, err := url.Parse(c.sso.cfg.Issuer); err == nil && u.Host != "" {
			formAction += " " + u.Scheme + "://" + u.Host
		}
	}
	c.csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action " +
		formAction + "; frame-ancestors 'none'; base-uri 'none'"
	c.routes()
	return c, nil
}

// Mount serves the console under Prefix and everything else with api: one
// listener, one TLS configuration, one server.
func Mount(api http.Handler, c *Console) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == Prefix || strings.HasPrefix(r.URL.Path, Prefix+"/") {
			c.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

func (c *Console) routes() {
	m := http.NewServeMux()
	c.mux = m
	const ns = Prefix + "/ns/{ns}"
	const agent = ns + "/agents/{agent}"
	m.Handle("GET "+Prefix+"/static/", c.staticFiles())
	m.HandleFunc("GET "+Prefix+"/login", c.loginPage)
	m.HandleFunc("POST "+Prefix+"/login", c.login)
	m.Handle("POST "+Prefix+"/logout", c.form(c.logout))
	m.HandleFunc("GET "+Prefix+"/sso/start", c.ssoStart)
	m.HandleFunc("GET "+Prefix+"/sso/callback", c.ssoCallback)
	m.Handle("GET "+Prefix+"/{$}", c.page(c.namespacesPage))
	m.Handle("GET "+ns, c.page(c.agentsPage))
	m.Handle("GET "+ns+"/new", c.page(c.createPage))
	m.Handle("POST "+ns+"/agents", c.form(c.createAgent))
	c.credentialRoutes(m, ns)
	m.Handle("GET "+agent, c.page(c.agentPage))
	m.Handle("POST "+agent+"/deploy", c.form(c.deploy))
	m.Handle("POST "+agent+"/stop", c.form(c.stop))
	m.Handle("GET "+agent+"/events", c.authed(c.events))
	m.Handle("GET "+agent+"/logs", c.page(c.logsPage))
	m.Handle("GET "+agent+"/files", c.page(c.filesPage))
	m.Handle("POST "+agent+"/files/{name}", c.form(c.saveFile))
	m.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
	})
	m.Handle("/", c.page(func(w http.ResponseWriter, r *http.Request, s *session) error {
		return notFoundf("no console page at %s", r.URL.Path)
	}))
}

// ServeHTTP implements http.Handler: every answer carries the security
// headers.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", c.csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	c.mux.ServeHTTP(w, withClientAddr(r))
}

func (c *Console) staticFiles() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		c.static.ServeHTTP(w, r)
	})
}

// Static reads an embedded static file (tests, docs).
func Static(name string) ([]byte, error) {
	f, err := assets.Open("static/" + name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
