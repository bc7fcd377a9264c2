package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

// Session lifetimes: a session ends after SessionIdle without a request, and
// at the latest SessionMax after login.
const (
	SessionIdle = 30 * time.Minute
	SessionMax  = 12 * time.Hour
	// MaxSessions bounds the server-side store; the oldest session goes first.
	MaxSessions = 10000
)

// Cookie names. The session cookie carries only a random id; the token the
// user logged in with stays server-side.
const (
	cookieSession = "oce_console"
	cookieLogin   = "oce_console_login" // the login form's CSRF pair (pre-session)
	cookiePath    = "/console"
)

// session is one logged-in user, held server-side.
type session struct {
	id        string
	principal Principal
	token     string // forwarded to the API as the bearer; never sent to the browser
	csrf      string
	created   time.Time
	lastSeen  time.Time
}

// sessions is the server-side store.
type sessions struct {
	mu   sync.Mutex
	byID map[string]*session
	now  func() time.Time
	idle time.Duration
	max  time.Duration
}

func newSessions(now func() time.Time, idle, max time.Duration) *sessions {
	return &sessions{byID: map[string]*session{}, now: now, idle: idle, max: max}
}

// randomToken is 32 random bytes, base64url.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (s *sessions) create(p Principal, token string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.sweepLocked(now)
	if len(s.byID) >= MaxSessions {
		var oldest *session
		for _, x := range s.byID {
			if oldest == nil || x.created.Before(oldest.created) {
				oldest = x
			}
		}
		delete(s.byID, oldest.id)
	}
	ss := &session{id: randomToken(), principal: p, token: token, csrf: randomToken(), created: now, lastSeen: now}
	s.byID[ss.id] = ss
	return ss
}

// get returns the live session of id and marks it seen; an expired one is
// removed.
func (s *sessions) get(id string) (*session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.byID[id]
	if !ok {
		return nil, false
	}
	now := s.now()
	if now.Sub(ss.lastSeen) > s.idle || now.Sub(ss.created) > s.max {
		delete(s.byID, id)
		return nil, false
	}
	ss.lastSeen = now
	cp := *ss
	return &cp, true
}

func (s *sessions) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
}

func (s *sessions) sweepLocked(now time.Time) {
	for id, ss := range s.byID {
		if now.Sub(ss.lastSeen) > s.idle || now.Sub(ss.created) > s.max {
			delete(s.byID, id)
		}
	}
}

// cookie builds a console cookie: HttpOnly, SameSite=Strict, path /console,
// Secure under TLS.
func (c *Console) cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: cookiePath, MaxAge: maxAge, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: c.secure(r)}
}

func (c *Console) secure(r *http.Request) bool { return c.cfg.Secure || r.TLS != nil }

// sessionOf returns the request's live session.
func (c *Console) sessionOf(r *http.Request) (*session, bool) {
	ck, err := r.Cookie(cookieSession)
	if err != nil || ck.Value == "" {
		return nil, false
	}
	return c.sessions.get(ck.Value)
}

// equal compares secrets in constant time.
func equal(a, b string) bool {
	return a != "" && b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
