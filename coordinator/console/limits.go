package console

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"oce.dev/oce/coordinator/ratelimit"
)

// Login limits (issue 25): per source address, logins may be attempted at
// loginRate (a burst of loginBurst), and fail at failRate (a burst of
// failBurst); beyond either the form answers 429 with Retry-After. The API
// the console authenticates against applies its own limits too: the
// console's calls carry the browser's address (clientAddr), so a
// guesser's failures lock out the guesser's source, never the console.
const (
	loginRate  = 1.0
	loginBurst = 20
	failRate   = 0.1
	failBurst  = 10
)

// ErrRateLimited: the API answered 429 to the login's authentication.
var ErrRateLimited = errors.New("console: too many attempts")

type loginLimits struct {
	attempts, failures *ratelimit.Set
}

func newLoginLimits(now func() time.Time) *loginLimits {
	return &loginLimits{attempts: ratelimit.New(loginRate, loginBurst, now), failures: ratelimit.New(failRate, failBurst, now)}
}

// admit spends one attempt of the request's source, unless it is out of
// attempts or failures; it returns how long to wait when it is.
func (l *loginLimits) admit(r *http.Request) (bool, time.Duration) {
	src := ratelimit.SourceKey(r.RemoteAddr)
	if locked, wait := l.failures.Empty(src); locked {
		return false, wait
	}
	return l.attempts.Take(src)
}

// failed spends one failure of the request's source.
func (l *loginLimits) failed(r *http.Request) { l.failures.Take(ratelimit.SourceKey(r.RemoteAddr)) }

// retryAfter is a wait as whole seconds, at least one.
func retryAfter(wait time.Duration) int { return max(1, int(math.Ceil(wait.Seconds()))) }

// tooManyLogins answers the login form with 429.
func (c *Console) tooManyLogins(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	secs := retryAfter(wait)
	c.log.Warn("console: login attempts from one source limited", "retryAfterSeconds", secs)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	c.showLogin(w, r, http.StatusTooManyRequests, fmt.Sprintf("Too many login attempts; try again in %d s.", secs))
}

type clientAddrKey struct{}

// withClientAddr carries the browser's address to the console's
// in-process API calls.
func withClientAddr(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), clientAddrKey{}, r.RemoteAddr))
}

// clientAddr is the browser's address a context carries, or this
// process's.
func clientAddr(ctx context.Context) string {
	if a, ok := ctx.Value(clientAddrKey{}).(string); ok && a != "" {
		return a
	}
	return "127.0.0.1:0"
}
