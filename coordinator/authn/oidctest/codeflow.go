package oidctest

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// codeFlow is the authorization code flow of one confidential client:
// /authorize signs in the user LoginAs names (there is no login form), the
// token endpoint checks the client, the code (once), the redirect URI and
// the PKCE S256 verifier, and refresh tokens rotate.
type codeFlow struct {
	mu          sync.Mutex
	clientID    string
	secret      string
	redirectURI string
	sub         string
	groups      []string
	nonce       *string // replaces the ID token's nonce when set
	codes       map[string]*authCode
	refresh     map[string]grant // refresh token → whose
	disabled    map[string]bool
	refreshes   int
	revocations int
	endSessions []url.Values
}

type authCode struct {
	grant
	nonce, challenge, redirect string
	used                       bool
}

type grant struct {
	sub    string
	groups []string
}

// EnableCodeFlow registers the one client of the code flow.
func (is *Issuer) EnableCodeFlow(clientID, secret, redirectURI string) {
	c := &is.code
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clientID, c.secret, c.redirectURI = clientID, secret, redirectURI
	c.codes, c.refresh, c.disabled = map[string]*authCode{}, map[string]grant{}, map[string]bool{}
}

// LoginAs makes /authorize sign in sub with groups; "" refuses
// (error=access_denied).
func (is *Issuer) LoginAs(sub string, groups []string) {
	is.code.mu.Lock()
	defer is.code.mu.Unlock()
	is.code.sub, is.code.groups = sub, groups
}

// Disable refuses sub's refresh grants from now on, as a provider does for
// a disabled account.
func (is *Issuer) Disable(sub string) {
	is.code.mu.Lock()
	defer is.code.mu.Unlock()
	is.code.disabled[sub] = true
}

// ForgeNonce makes the code grant's ID tokens carry nonce instead of the
// login's.
func (is *Issuer) ForgeNonce(nonce string) {
	is.code.mu.Lock()
	defer is.code.mu.Unlock()
	is.code.nonce = &nonce
}

// Refreshes counts the refresh grants answered with tokens.
func (is *Issuer) Refreshes() int {
	is.code.mu.Lock()
	defer is.code.mu.Unlock()
	return is.code.refreshes
}

// Revocations counts the refresh tokens revoked at /revoke.
func (is *Issuer) Revocations() int {
	is.code.mu.Lock()
	defer is.code.mu.Unlock()
	return is.code.revocations
}

// EndSessions returns the queries /end_session received.
func (is *Issuer) EndSessions() []url.Values {
	is.code.mu.Lock()
	defer is.code.mu.Unlock()
	return slices.Clone(is.code.endSessions)
}

func (is *Issuer) codeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /authorize", is.authorize)
	mux.HandleFunc("POST /revoke", is.revoke)
	mux.HandleFunc("GET /end_session", is.endSession)
}

func (is *Issuer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c := &is.code
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clientID == "" || q.Get("client_id") != c.clientID || q.Get("redirect_uri") != c.redirectURI {
		http.Error(w, "unknown client or redirect URI", http.StatusBadRequest)
		return
	}
	back, _ := url.Parse(c.redirectURI)
	v := url.Values{"state": {q.Get("state")}}
	switch {
	case q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" ||
		!slices.Contains(strings.Fields(q.Get("scope")), "openid"):
		v.Set("error", "invalid_request")
	case c.sub == "":
		v.Set("error", "access_denied")
	default:
		code := randHex(16)
		c.codes[code] = &authCode{grant: grant{sub: c.sub, groups: c.groups}, nonce: q.Get("nonce"),
			challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri")}
		v.Set("code", code)
	}
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// clientOK checks client_secret_basic or client_secret_post; c.mu is held.
func (c *codeFlow) clientOK(r *http.Request) bool {
	id, secret, ok := r.BasicAuth()
	if ok {
		// oauth2 form-encodes the parts of the basic credentials
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	return c.clientID != "" && id == c.clientID && subtle.ConstantTimeCompare([]byte(secret), []byte(c.secret)) == 1
}

func (is *Issuer) codeGrant(w http.ResponseWriter, r *http.Request) {
	c := &is.code
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.clientOK(r) {
		writeJSON(w, 401, map[string]string{"error": "invalid_client"})
		return
	}
	ac, ok := c.codes[r.PostForm.Get("code")]
	if !ok || ac.used || ac.redirect != r.PostForm.Get("redirect_uri") {
		writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
		return
	}
	ac.used = true // a code is good once, whatever follows
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	if base64.RawURLEncoding.EncodeToString(sum[:]) != ac.challenge {
		writeJSON(w, 400, map[string]string{"error": "invalid_grant", "error_description": "PKCE verification failed"})
		return
	}
	nonce := ac.nonce
	if c.nonce != nil {
		nonce = *c.nonce
	}
	is.issue(w, c, ac.grant, nonce)
}

func (is *Issuer) refreshGrant(w http.ResponseWriter, r *http.Request) {
	c := &is.code
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.clientOK(r) {
		writeJSON(w, 401, map[string]string{"error": "invalid_client"})
		return
	}
	rt := r.PostForm.Get("refresh_token")
	g, ok := c.refresh[rt]
	if !ok || c.disabled[g.sub] {
		writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
		return
	}
	delete(c.refresh, rt) // rotation: the old token is spent
	c.refreshes++
	is.issue(w, c, g, "")
}

// issue answers a grant with an ID, access and refresh token; c.mu is held.
func (is *Issuer) issue(w http.ResponseWriter, c *codeFlow, g grant, nonce string) {
	tok, err := is.Sign(Claims{Subject: g.sub, Groups: g.groups, Audience: c.clientID, Nonce: nonce})
	if err != nil {
		writeJSON(w, 500, map[string]string{"error": "server_error"})
		return
	}
	rt := randHex(16)
	c.refresh[rt] = g
	writeJSON(w, 200, map[string]any{"access_token": randHex(16), "token_type": "Bearer", "expires_in": 3600,
		"refresh_token": rt, "id_token": tok})
}

func (is *Issuer) revoke(w http.ResponseWriter, r *http.Request) {
	c := &is.code
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := r.ParseForm(); err != nil || !c.clientOK(r) {
		writeJSON(w, 401, map[string]string{"error": "invalid_client"})
		return
	}
	if _, ok := c.refresh[r.PostForm.Get("token")]; ok {
		delete(c.refresh, r.PostForm.Get("token"))
		c.revocations++
	}
	w.WriteHeader(http.StatusOK)
}

func (is *Issuer) endSession(w http.ResponseWriter, r *http.Request) {
	c := &is.code
	c.mu.Lock()
	q := r.URL.Query()
	c.endSessions = append(c.endSessions, q)
	c.mu.Unlock()
	if u := q.Get("post_logout_redirect_uri"); u != "" {
		http.Redirect(w, r, u, http.StatusFound)
		return
	}
	_, _ = w.Write([]byte("signed out"))
}
