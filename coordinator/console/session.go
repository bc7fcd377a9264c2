package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"sync"
	"time"
)

// Session lifetimes: a session ends after SessionIdle without a request, and
// at the latest SessionMax after login.
const (
	SessionIdle = 30 * time.Minute
	SessionMax  = 12 * time.Hour
	// MaxSessions bounds the server-side store. When it is full a new
	// login is refused (ErrTooManySessions): no user's login ends another
	// user's session.
	MaxSessions = 10000
	// MaxSessionsPerUser bounds one user's sessions: a login beyond it ends
	// that user's own oldest session.
	MaxSessionsPerUser = 16
)

// ErrTooManySessions: the session store is full of other users' live
// sessions.
var ErrTooManySessions = errors.New("console: too many sessions; try again later")

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
	token     string      // forwarded to the API as the bearer; never sent to the browser
	sso       *ssoSession // a single sign-on session's renewal (sso.go); nil for a token login
	csrf      string
	created   time.Time
	lastSeen  time.Time
}

// sessions is the server-side store, indexed by user so one user's logins
// only ever end that user's sessions.
type sessions struct {
	mu     sync.Mutex
	byID   map[string]*session
	byUser map[string]map[string]*session // principal name → its sessions by id
	now    func() time.Time
	idle   time.Duration
	max    time.Duration
	swept  time.Time
}

func newSessions(now func() time.Time, idle, max time.Duration) *sessions {
	return &sessions{byID: map[string]*session{}, byUser: map[string]map[string]*session{}, now: now, idle: idle, max: max}
}

// randomToken is 32 random bytes, base64url.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// create starts a session for p. At MaxSessionsPerUser the user's own
// oldest session ends; a full store refuses with ErrTooManySessions.
func (s *sessions) create(p Principal, token string) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	mine := s.byUser[p.Name]
	for id, x := range mine {
		if s.expired(x, now) {
			s.removeLocked(id)
		}
	}
	if len(mine) >= MaxSessionsPerUser {
		var oldest *session
		for _, x := range mine {
			if oldest == nil || x.created.Before(oldest.created) || x.created.Equal(oldest.created) && x.id < oldest.id {
				oldest = x
			}
		}
		s.removeLocked(oldest.id)
	}
	if len(s.byID) >= MaxSessions && now.Sub(s.swept) >= time.Second {
		// A sweep visits every session: at most once a second.
		s.swept = now
		s.sweepLocked(now)
	}
	if len(s.byID) >= MaxSessions {
		return nil, ErrTooManySessions
	}
	ss := &session{id: randomToken(), principal: p, token: token, csrf: randomToken(), created: now, lastSeen: now}
	s.byID[ss.id] = ss
	if s.byUser[p.Name] == nil {
		s.byUser[p.Name] = map[string]*session{}
	}
	s.byUser[p.Name][ss.id] = ss
	return ss, nil
}

func (s *sessions) expired(ss *session, now time.Time) bool {
	return now.Sub(ss.lastSeen) > s.idle || now.Sub(ss.created) > s.max
}

// removeLocked ends a session; s.mu is held.
func (s *sessions) removeLocked(id string) {
	ss, ok := s.byID[id]
	if !ok {
		return
	}
	delete(s.byID, id)
	if mine := s.byUser[ss.principal.Name]; mine != nil {
		delete(mine, id)
		if len(mine) == 0 {
			delete(s.byUser, ss.principal.Name)
		}
	}
}

// userSessions counts a user's sessions (tests).
func (s *sessions) userSessions(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byUser[name])
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
	if s.expired(ss, now) {
		s.removeLocked(id)
		return nil, false
	}
	ss.lastSeen = now
	cp := *ss
	return &cp, true
}

// update changes a live session under the store's lock.
func (s *sessions) update(id string, f func(*session)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss, ok := s.byID[id]; ok {
		f(ss)
	}
}

func (s *sessions) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeLocked(id)
}

func (s *sessions) sweepLocked(now time.Time) {
	for id, ss := range s.byID {
		if s.expired(ss, now) {
			s.removeLocked(id)
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
