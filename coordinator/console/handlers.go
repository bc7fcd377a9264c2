package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
	"oce.dev/oce/shared/codes"
)

// handler is a console page or form handler; a returned error renders the
// error page with its status.
type handler func(w http.ResponseWriter, r *http.Request, s *session) error

// pageError is an error page: a status and what to tell the user.
type pageError struct {
	status int
	title  string
	msg    string
	code   string
}

func (e *pageError) Error() string { return e.title + ": " + e.msg }

func notFoundf(format string, a ...any) error {
	return &pageError{status: http.StatusNotFound, title: "Not found", msg: fmt.Sprintf(format, a...), code: string(codes.NotFound)}
}

func forbidden(what string) error {
	return &pageError{status: http.StatusForbidden, title: "Forbidden", msg: "You may not " + what + ".", code: "FORBIDDEN"}
}

func badRequest(code, msg string) error {
	return &pageError{status: http.StatusBadRequest, title: "Refused", msg: msg, code: code}
}

// errSessionGone: the API no longer accepts the session's token.
var errSessionGone = errors.New("console: the session's token is no longer accepted")

// apiErr maps an API error onto a page error.
func apiErr(err error) error {
	var ce *client.Error
	if !errors.As(err, &ce) {
		return &pageError{status: http.StatusBadGateway, title: "Unavailable", msg: "The coordinator could not answer.",
			code: string(codes.Internal)}
	}
	switch ce.Status {
	case http.StatusUnauthorized:
		return errSessionGone
	case http.StatusForbidden:
		return &pageError{status: http.StatusForbidden, title: "Forbidden", msg: ce.Message, code: string(ce.Code)}
	case http.StatusNotFound:
		return &pageError{status: http.StatusNotFound, title: "Not found", msg: ce.Message, code: string(ce.Code)}
	}
	status := ce.Status
	if status < 400 {
		status = http.StatusBadGateway
	}
	return &pageError{status: status, title: "Refused", msg: ce.Message, code: string(ce.Code)}
}

// authed requires a live session; without one the browser goes to the
// login page (a request for data gets 401).
func (c *Console) authed(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := c.sessionOf(r)
		if !ok {
			if r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream" {
				http.Redirect(w, r, Prefix+"/login?next="+url.QueryEscape(r.URL.Path), http.StatusSeeOther)
				return
			}
			http.Error(w, "log in first", http.StatusUnauthorized)
			return
		}
		s, err := c.revalidate(r.Context(), s)
		if err != nil {
			http.SetCookie(w, c.cookie(r, cookieSession, "", -1))
			if r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream" {
				http.Redirect(w, r, Prefix+"/login?ended="+string(SSOSessionEnded), http.StatusSeeOther)
				return
			}
			http.Error(w, "your single sign-on session ended; sign in again", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		if err := h(w, r, s); err != nil {
			c.fail(w, r, s, err)
		}
	})
}

// page is a GET page behind a session.
func (c *Console) page(h handler) http.Handler { return c.authed(h) }

// form is a POST behind a session and its CSRF token. A request from
// another origin, or without the session's token, changes nothing.
func (c *Console) form(h handler) http.Handler {
	return c.authed(func(w http.ResponseWriter, r *http.Request, s *session) error {
		if !sameOrigin(r) {
			c.log.Warn("console: cross-origin form refused", "path", r.URL.Path)
			return &pageError{status: http.StatusForbidden, title: "Refused", msg: "Cross-origin request refused.", code: "CSRF"}
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			return badRequest(string(codes.InvalidRequest), "The form is too large or malformed.")
		}
		if !equal(r.PostForm.Get("csrf"), s.csrf) {
			c.log.Warn("console: form without a valid CSRF token refused", "path", r.URL.Path)
			return &pageError{status: http.StatusForbidden, title: "Refused",
				msg: "The form's security token is missing or stale; reload the page and try again.", code: "CSRF"}
		}
		return h(w, r, s)
	})
}

// maxFormBytes bounds a form: a workspace document, URL-encoded.
const maxFormBytes = 4 << 20

// sameOrigin accepts a request whose Origin (or, lacking it, Sec-Fetch-Site)
// does not name another site.
func sameOrigin(r *http.Request) bool {
	// "null" is what a browser sends under a strict referrer policy; the
	// fetch metadata then decides
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		u, err := url.Parse(o)
		return err == nil && u.Host == r.Host
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return true
	}
	return false
}

// fail renders err as the error page (or back to login for a dead session).
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	if errors.Is(err, errSessionGone) {
		c.sessions.remove(s.id)
		http.SetCookie(w, c.cookie(r, cookieSession, "", -1))
		http.Redirect(w, r, Prefix+"/login", http.StatusSeeOther)
		return
	}
	var pe *pageError
	if !errors.As(err, &pe) {
		c.log.Error("console: page failed", "path", r.URL.Path, "error", err.Error())
		pe = &pageError{status: http.StatusInternalServerError, title: "Error", msg: "The page could not be rendered.",
			code: string(codes.Internal)}
	}
	if pe.status >= 400 && pe.status < 500 {
		c.log.Info("console: request refused", "path", r.URL.Path, "status", pe.status, "code", pe.code)
	}
	c.render(w, pe.status, "error", s, struct {
		Title, Message, Code string
	}{pe.title, pe.msg, pe.code})
}

// render writes page name with data inside the layout.
func (c *Console) render(w http.ResponseWriter, status int, name string, s *session, data any) {
	var b bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&b, "layout", layoutData{Session: viewSession(s), Page: data}); err != nil {
		c.log.Error("console: template failed", "page", name, "error", err.Error())
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// layoutData is what every page's layout reads.
type layoutData struct {
	Session *sessionView
	Page    any
}

// sessionView is the session as templates see it: no token.
type sessionView struct {
	User string
	CSRF string
}

func viewSession(s *session) *sessionView {
	if s == nil {
		return nil
	}
	return &sessionView{User: s.principal.Name, CSRF: s.csrf}
}

// access is what the session's principal may do on one resource.
type access map[Action]bool

// access decides acts on res for the session: the configured Authorizer,
// else the API with the session's token (one request per page). When the
// API cannot say, the page offers none of them.
func (c *Console) access(ctx context.Context, s *session, res Resource, acts ...Action) access {
	out := access{}
	if a := c.cfg.Authorizer; a != nil {
		for _, act := range acts {
			out[act] = a.Allowed(ctx, s.principal, act, res)
		}
		return out
	}
	cl := c.apiClient(s.token)
	var acc wire.Access
	var err error
	if res.Agent != "" {
		acc, err = cl.AgentAccess(ctx, res.Namespace, res.Agent)
	} else {
		acc, err = cl.NamespaceAccess(ctx, res.Namespace)
	}
	if err != nil {
		c.log.Warn("console: what the user may do is unknown", "namespace", res.Namespace, "agent", res.Agent,
			"error", err.Error())
		return out
	}
	for _, act := range acts {
		out[act] = acc.Allowed(string(act))
	}
	return out
}

// can decides one action for the session.
func (c *Console) can(ctx context.Context, s *session, a Action, res Resource) bool {
	return c.access(ctx, s, res, a)[a]
}

// refuses reports a form's action refused before the API is asked: only a
// configured Authorizer refuses here. Otherwise the API decides the request
// itself — and records a denied attempt in the audit trail, which a refusal
// here would hide.
func (c *Console) refuses(ctx context.Context, s *session, a Action, res Resource) bool {
	return c.cfg.Authorizer != nil && !c.cfg.Authorizer.Allowed(ctx, s.principal, a, res)
}
