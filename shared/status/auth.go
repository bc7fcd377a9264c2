package status

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
)

// RemoteStatusContext prefixes the revision ID in the remote-status HMAC.
const RemoteStatusContext = "openclaw-plugin-status/v1\x00"

// RemoteStatusToken is the bearer a Gateway presents to its Harness peer's
// remote-status route: hex(HMAC-SHA256(key, RemoteStatusContext+revisionID)).
func RemoteStatusToken(key []byte, revisionID string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(RemoteStatusContext + revisionID))
	return hex.EncodeToString(m.Sum(nil))
}

func (s *Server) allowed(mode AuthMode, r *http.Request) bool {
	switch mode {
	case AuthNone:
		return true
	case AuthLoopback:
		return loopback(r)
	case AuthToken:
		return s.bearerOK(r)
	default: // AuthLocal and anything unknown
		return loopback(r) || s.bearerOK(r)
	}
}

func loopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// bearerOK accepts exactly one "Authorization: Bearer <token>" header whose
// token equals the expected one, compared in constant time.
func (s *Server) bearerOK(r *http.Request) bool {
	if s.token == "" {
		return false
	}
	vals := r.Header.Values("Authorization")
	if len(vals) != 1 {
		return false
	}
	scheme, tok, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(tok), []byte(s.token)) == 1
}
