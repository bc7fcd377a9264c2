package console

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSessionFloodKeepsOtherUsersSessions: 10,000 logins of one user end
// only that user's own oldest sessions; a store full of other users'
// sessions refuses a new login rather than end anyone's.
func TestSessionFloodKeepsOtherUsersSessions(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	s := newSessions(func() time.Time { return now }, SessionIdle, SessionMax)
	victim, err := s.create(Principal{Name: "user:vera"}, "vera-token")
	require.NoError(t, err)
	var last *session
	for i := range MaxSessions {
		now = now.Add(time.Millisecond)
		last, err = s.create(Principal{Name: "user:mallory"}, fmt.Sprint(i))
		require.NoError(t, err)
	}
	_, ok := s.get(victim.id)
	require.True(t, ok, "another user's flood never ends vera's session")
	require.Equal(t, MaxSessionsPerUser, s.userSessions("user:mallory"))
	_, ok = s.get(last.id)
	require.True(t, ok, "the flooder keeps its newest sessions")

	// Fill the store with distinct users: the next login is refused.
	for i := 0; len(s.byID) < MaxSessions; i++ {
		_, err := s.create(Principal{Name: fmt.Sprintf("user:u%d", i)}, "t")
		require.NoError(t, err)
	}
	_, err = s.create(Principal{Name: "user:newcomer"}, "t")
	require.ErrorIs(t, err, ErrTooManySessions)
	_, ok = s.get(victim.id)
	require.True(t, ok)
	// Expired sessions make room again.
	now = now.Add(SessionIdle + time.Minute)
	_, err = s.create(Principal{Name: "user:newcomer"}, "t")
	require.NoError(t, err)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestLoginRateLimited: failed logins from one source are limited (429
// with Retry-After) whatever token follows; the API's own 429 is shown as
// such; the console's API calls carry the browser's address.
func TestLoginRateLimited(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	var seen []string
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.RemoteAddr)
		mu.Unlock()
		if r.Header.Get("Authorization") == "Bearer locked" {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		if r.Header.Get("Authorization") != "Bearer good" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"actor":"user:vera"}`))
	})
	c, err := New(Config{API: api, Now: clock, Authorizer: AllowAll{}})
	require.NoError(t, err)
	srv := httptest.NewServer(Mount(api, c))
	t.Cleanup(srv.Close)
	login := func(token string) *http.Response {
		jar, _ := cookiejar.New(nil) // a browser without a session
		hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := hc.Get(srv.URL + "/console/login")
		require.NoError(t, err)
		m := csrfField.FindStringSubmatch(readAll(t, res))
		require.NotNil(t, m)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/console/login",
			strings.NewReader(url.Values{"csrf": {m[1]}, "token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", srv.URL)
		res, err = hc.Do(req)
		require.NoError(t, err)
		readAll(t, res)
		return res
	}
	for range failBurst {
		require.Equal(t, http.StatusUnauthorized, login("wrong").StatusCode)
	}
	res := login("good")
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode, "locked out: even a good token waits")
	require.Equal(t, "10", res.Header.Get("Retry-After"))
	mu.Lock()
	now = now.Add(10 * time.Second)
	mu.Unlock()
	require.Equal(t, http.StatusSeeOther, login("good").StatusCode)

	res = login("locked")
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode, "the API's lockout is shown as a lockout")
	require.Equal(t, "7", res.Header.Get("Retry-After"))
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, seen)
	for _, a := range seen {
		require.NotEqual(t, "127.0.0.1:0", a, "the API sees the browser's address")
	}
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(b)
}
