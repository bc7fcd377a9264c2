package console

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"oce.dev/oce/coordinator/api/wire"
)

// Principal is who a console session acts for.
type Principal struct {
	// Name is shown in the header and recorded by the API as the actor.
	Name string
	// Roles are informational (shown); decisions are the Authorizer's.
	Roles []string
}

// Authenticator turns the API token a user logs in with into a Principal.
// The identities of issue 17 plug in here (hashed tokens, expiry,
// revocation); ErrBadToken is the only failure a login form shows.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (Principal, error)
}

// ErrBadToken: the token is unknown, expired or revoked.
var ErrBadToken = errors.New("console: the token is not valid")

// RateLimitedError: the API refused the authentication for now (the
// source address is locked out); it is ErrRateLimited.
type RateLimitedError struct{ RetryAfter time.Duration }

func (e *RateLimitedError) Error() string { return ErrRateLimited.Error() }

// Unwrap makes it ErrRateLimited.
func (e *RateLimitedError) Unwrap() error { return ErrRateLimited }

// Action names what a page offers to do, by the API action that decides it
// (wire.Action*): a page shows only what the principal may do. The API
// decides again on every request (the console forwards the session's
// token), so a hidden button is a courtesy, never the check.
type Action string

// Actions the console offers. Writing workspace documents is an update of
// the Agent (the API authorizes UpdateAgent).
const (
	ActionCreateAgent Action = wire.ActionCreateAgent
	ActionDeploy      Action = wire.ActionDeployAgent
	ActionStop        Action = wire.ActionStopAgent
	ActionWriteFiles  Action = wire.ActionUpdateAgent

	ActionCreateCredential   Action = wire.ActionCreateCredentialSource
	ActionRotateCredential   Action = wire.ActionRotateCredentialSource
	ActionWithdrawCredential Action = wire.ActionWithdrawCredentialSource
)

// Resource is what an action is about: a Namespace, or an Agent in it.
type Resource struct {
	Namespace string
	Agent     string
}

// Authorizer decides actions for a Principal in place of the API. Without
// one (the coordinator's wiring) the console asks the API what the session
// may do (GET …/access with the session's token): the API's IAMDriver
// decides on the exact resources the requests would touch — a deploy with
// its admitted facts — so the pages and the API agree.
type Authorizer interface {
	Allowed(ctx context.Context, p Principal, a Action, r Resource) bool
}

// TokenAuthenticator accepts the coordinator's one bearer token (compared in
// constant time) as the principal "admin": the authentication every API
// request has until identities exist.
type TokenAuthenticator struct {
	Token string
}

// Authenticate implements Authenticator.
func (t TokenAuthenticator) Authenticate(_ context.Context, token string) (Principal, error) {
	if t.Token == "" || token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(t.Token)) != 1 {
		return Principal{}, ErrBadToken
	}
	return Principal{Name: "admin", Roles: []string{"cluster-admin"}}, nil
}

// AllowAll permits every action (tests; a page then offers everything and
// the API refuses what the principal may not do).
type AllowAll struct{}

// Allowed implements Authorizer.
func (AllowAll) Allowed(context.Context, Principal, Action, Resource) bool { return true }

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(ctx context.Context, p Principal, a Action, r Resource) bool

// Allowed implements Authorizer.
func (f AuthorizerFunc) Allowed(ctx context.Context, p Principal, a Action, r Resource) bool {
	return f(ctx, p, a, r)
}

// AuthenticatorFunc adapts a function to Authenticator.
type AuthenticatorFunc func(ctx context.Context, token string) (Principal, error)

// Authenticate implements Authenticator.
func (f AuthenticatorFunc) Authenticate(ctx context.Context, token string) (Principal, error) {
	return f(ctx, token)
}

// APIAuthenticator accepts any token the API accepts (the bootstrap token,
// minted API tokens, OIDC bearer JWTs): it asks GET /v1/whoami with it, in
// process, and names the principal by the API's actor.
type APIAuthenticator struct{ API http.Handler }

// Authenticate implements Authenticator.
func (a APIAuthenticator) Authenticate(ctx context.Context, token string) (Principal, error) {
	if token == "" {
		return Principal{}, ErrBadToken
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://console.invalid/v1/whoami", nil)
	if err != nil {
		return Principal{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := inProcess{a.API}.RoundTrip(req)
	if err != nil {
		return Principal{}, err
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusTooManyRequests {
		secs, _ := strconv.Atoi(res.Header.Get("Retry-After"))
		return Principal{}, &RateLimitedError{RetryAfter: time.Duration(max(secs, 1)) * time.Second}
	}
	if res.StatusCode != http.StatusOK {
		return Principal{}, ErrBadToken
	}
	var who struct {
		Actor string `json:"actor"`
	}
	if err := json.NewDecoder(res.Body).Decode(&who); err != nil || who.Actor == "" {
		return Principal{}, ErrBadToken
	}
	return Principal{Name: who.Actor}, nil
}
