package console

import (
	"errors"
	"net/http"
	"strings"
)

// loginTokenMax bounds the token field of the login form.
const loginTokenMax = 4096

type loginView struct {
	CSRF  string
	Next  string
	Error string
	// SSO names the single sign-on provider; empty without one.
	SSO string
}

// loginPage shows the token form. Its CSRF token is a pre-session pair: a
// random value in a short-lived SameSite=Strict cookie and in the form.
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.sessionOf(r); ok {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	msg := ""
	if r.URL.Query().Get("ended") == string(SSOSessionEnded) {
		msg = "Your single sign-on session ended: the provider no longer renews it (" + string(SSOSessionEnded) + "). Sign in again."
	}
	c.showLogin(w, r, http.StatusOK, msg)
}

func (c *Console) showLogin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	pair := randomToken()
	http.SetCookie(w, c.cookie(r, cookieLogin, pair, 600))
	w.Header().Set("Cache-Control", "no-store")
	v := loginView{CSRF: pair, Next: safeNext(r.FormValue("next")), Error: msg}
	if c.sso != nil {
		v.SSO = c.sso.cfg.Name
	}
	c.render(w, status, "login", nil, v)
}

// login checks the pair and the token, then starts a server-side session.
// The token travels in the POST body only; the browser gets a random id.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		c.showLogin(w, r, http.StatusBadRequest, "The form is malformed.")
		return
	}
	ck, err := r.Cookie(cookieLogin)
	if !sameOrigin(r) || err != nil || !equal(ck.Value, r.PostForm.Get("csrf")) {
		c.log.Warn("console: login without a valid CSRF pair refused")
		c.showLogin(w, r, http.StatusForbidden, "The login form expired; try again.")
		return
	}
	if ok, wait := c.logins.admit(r); !ok {
		c.tooManyLogins(w, r, wait)
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	if token == "" || len(token) > loginTokenMax {
		c.logins.failed(r)
		c.showLogin(w, r, http.StatusUnauthorized, "That token is not valid.")
		return
	}
	p, err := c.cfg.Authenticator.Authenticate(r.Context(), token)
	var limited *RateLimitedError
	if errors.As(err, &limited) {
		c.tooManyLogins(w, r, limited.RetryAfter)
		return
	}
	if err != nil {
		c.logins.failed(r)
		c.log.Info("console: login refused")
		c.showLogin(w, r, http.StatusUnauthorized, "That token is not valid.")
		return
	}
	s, err := c.sessions.create(p, token)
	if err != nil {
		c.log.Warn("console: login refused: the session store is full")
		w.Header().Set("Retry-After", "60")
		c.showLogin(w, r, http.StatusServiceUnavailable, "Too many sessions are open; try again later.")
		return
	}
	http.SetCookie(w, c.cookie(r, cookieLogin, "", -1))
	http.SetCookie(w, c.cookie(r, cookieSession, s.id, int(c.cfg.SessionMax.Seconds())))
	c.log.Info("console: login", "user", p.Name)
	http.Redirect(w, r, safeNext(r.PostForm.Get("next")), http.StatusSeeOther)
}

// logout ends the session; a single sign-on session's refresh token is
// revoked and the browser goes on to the provider's end_session endpoint.
func (c *Console) logout(w http.ResponseWriter, r *http.Request, s *session) error {
	c.sessions.remove(s.id)
	dest := c.ssoLogout(r.Context(), s)
	http.SetCookie(w, c.cookie(r, cookieSession, "", -1))
	http.Redirect(w, r, dest, http.StatusSeeOther)
	return nil
}

// safeNext keeps a redirect inside the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix+"/") || strings.HasPrefix(next, Prefix+"//") || strings.ContainsAny(next, "\\\r\n") ||
		strings.Contains(next, "/../") {
		return Prefix + "/"
	}
	return next
}
