// Package oidctest is an OIDC issuer for tests, on loopback: discovery,
// a JWKS of ECDSA keys the test generates (rotatable), signed ID tokens,
// the device authorization grant (RFC 8628) that occ login uses, and the
// authorization code flow with PKCE, refresh, revocation and end_session
// that the console's single sign-on uses (codeflow.go).
package oidctest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"

	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Issuer is a running test issuer.
type Issuer struct {
	srv *httptest.Server

	mu       sync.Mutex
	fetches  int   // JWKS requests served
	keys     []key // the JWKS; the last one signs
	devices  map[string]*device
	approve  func(userCode string) (sub string, groups []string, ok bool)
	Audience string
	code     codeFlow // codeflow.go
}

type key struct {
	id   string
	priv *ecdsa.PrivateKey
}

type device struct {
	userCode string
	approved bool
	sub      string
	groups   []string
	polls    int
}

// New starts an issuer whose tokens carry aud = audience.
func New(audience string) (*Issuer, error) {
	is := &Issuer{devices: map[string]*device{}, Audience: audience}
	if err := is.Rotate(); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", is.discovery)
	mux.HandleFunc("GET /keys", is.jwks)
	mux.HandleFunc("POST /device", is.deviceAuth)
	mux.HandleFunc("POST /token", is.token)
	is.codeRoutes(mux)
	is.srv = httptest.NewServer(mux)
	return is, nil
}

// URL is the issuer URL.
func (is *Issuer) URL() string { return is.srv.URL }

// Close stops the issuer.
func (is *Issuer) Close() { is.srv.Close() }

// Rotate adds a new signing key; earlier keys stay in the JWKS until Retire.
func (is *Issuer) Rotate() error {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys = append(is.keys, key{id: randHex(8), priv: priv})
	return nil
}

// Retire drops every key but the current one from the JWKS.
func (is *Issuer) Retire() {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys = is.keys[len(is.keys)-1:]
}

// Claims of a token.
type Claims struct {
	Subject  string
	Audience string // default the issuer's
	Groups   []string
	Expiry   time.Time // default an hour from now
	Issuer   string    // default the issuer's URL
	Nonce    string    // omitted when empty
}

// Sign returns a signed ID token with the current key.
func (is *Issuer) Sign(c Claims) (string, error) {
	is.mu.Lock()
	k := is.keys[len(is.keys)-1]
	is.mu.Unlock()
	return SignWith(k.priv, k.id, is.claims(c))
}

func (is *Issuer) claims(c Claims) map[string]any {
	if c.Audience == "" {
		c.Audience = is.Audience
	}
	if c.Expiry.IsZero() {
		c.Expiry = time.Now().Add(time.Hour)
	}
	if c.Issuer == "" {
		c.Issuer = is.URL()
	}
	m := map[string]any{"iss": c.Issuer, "sub": c.Subject, "aud": c.Audience, "exp": c.Expiry.Unix(),
		"iat": time.Now().Add(-time.Minute).Unix()}
	if c.Nonce != "" {
		m["nonce"] = c.Nonce
	}
	if c.Groups != nil {
		m["groups"] = c.Groups
	}
	return m
}

// SignWith signs claims with any ECDSA key (a forger's, in tests).
func SignWith(priv *ecdsa.PrivateKey, kid string, claims map[string]any) (string, error) {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: priv, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	obj, err := s.Sign(payload)
	if err != nil {
		return "", err
	}
	return obj.CompactSerialize()
}

// CurrentKeyID names the signing key (a forger reuses it).
func (is *Issuer) CurrentKeyID() string {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.keys[len(is.keys)-1].id
}

// ApproveDevices makes the device grant approve every user code as sub
// with groups (as if the user had logged in at the verification URI).
func (is *Issuer) ApproveDevices(sub string, groups []string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.approve = func(string) (string, []string, bool) { return sub, groups, true }
}

func (is *Issuer) discovery(w http.ResponseWriter, _ *http.Request) {
	u := is.URL()
	writeJSON(w, 200, map[string]any{
		"issuer": u, "jwks_uri": u + "/keys", "token_endpoint": u + "/token",
		"authorization_endpoint": u + "/authorize", "device_authorization_endpoint": u + "/device",
		"id_token_signing_alg_values_supported": []string{"ES256"},
		"response_types_supported":              []string{"id_token", "code"},
		"code_challenge_methods_supported":      []string{"S256"},
		"revocation_endpoint":                   u + "/revoke",
		"end_session_endpoint":                  u + "/end_session",
		"subject_types_supported":               []string{"public"},
	})
}

// KeyFetches counts the requests for the JWKS so far.
func (is *Issuer) KeyFetches() int {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.fetches
}

func (is *Issuer) jwks(w http.ResponseWriter, _ *http.Request) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.fetches++
	var set jose.JSONWebKeySet
	for _, k := range is.keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.priv.PublicKey, KeyID: k.id, Algorithm: "ES256", Use: "sig"})
	}
	writeJSON(w, 200, set)
}

func (is *Issuer) deviceAuth(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.PostForm.Get("client_id") != is.Audience {
		writeJSON(w, 400, map[string]string{"error": "invalid_client"})
		return
	}
	code, user := randHex(16), randHex(4)
	is.mu.Lock()
	is.devices[code] = &device{userCode: user}
	is.mu.Unlock()
	writeJSON(w, 200, map[string]any{"device_code": code, "user_code": user,
		"verification_uri": is.URL() + "/activate", "expires_in": 300, "interval": 1})
}

func (is *Issuer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err == nil {
		switch r.PostForm.Get("grant_type") {
		case "authorization_code":
			is.codeGrant(w, r)
			return
		case "refresh_token":
			is.refreshGrant(w, r)
			return
		}
	}
	if r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:device_code" {
		writeJSON(w, 400, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	is.mu.Lock()
	d, ok := is.devices[r.PostForm.Get("device_code")]
	approve := is.approve
	if ok && !d.approved && approve != nil {
		d.sub, d.groups, d.approved = approve(d.userCode)
	}
	is.mu.Unlock()
	switch {
	case !ok:
		writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
		return
	case !d.approved:
		writeJSON(w, 400, map[string]string{"error": "authorization_pending"})
		return
	}
	tok, err := is.Sign(Claims{Subject: d.sub, Groups: d.groups})
	if err != nil {
		writeJSON(w, 500, map[string]string{"error": "server_error"})
		return
	}
	writeJSON(w, 200, map[string]any{"access_token": randHex(16), "token_type": "Bearer", "expires_in": 3600,
		"id_token": tok})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
