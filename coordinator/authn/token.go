package authn

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// API tokens the coordinator mints: "oce_" + a 32-hex-digit token id + "_"
// + 43 base64url characters of 256 random bits. Only the hex SHA-256 of the
// whole token is stored; the id finds the record, and the hashes are
// compared in constant time.
const (
	TokenPrefix = "oce_"
	idLen       = 32
	secretBytes = 32
	secretLen   = 43 // base64url of 32 bytes, unpadded
	// TokenLen is the length of every minted token.
	TokenLen = len(TokenPrefix) + idLen + 1 + secretLen
)

// ErrMalformedToken: the text is not a minted token.
var ErrMalformedToken = errors.New("authn: malformed token")

// Minted is a new token: shown once to its owner, stored only as Hash.
type Minted struct {
	ID, Token, Hash string
}

// Mint makes a new token.
func Mint() (Minted, error) {
	var id [idLen / 2]byte
	var secret [secretBytes]byte
	if _, err := rand.Read(id[:]); err != nil {
		return Minted{}, fmt.Errorf("authn: mint: %w", err)
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return Minted{}, fmt.Errorf("authn: mint: %w", err)
	}
	tok := TokenPrefix + hex.EncodeToString(id[:]) + "_" + base64.RawURLEncoding.EncodeToString(secret[:])
	return Minted{ID: hex.EncodeToString(id[:]), Token: tok, Hash: Hash(tok)}, nil
}

// Hash is the stored form of a token: its hex SHA-256.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// ParseToken returns the id of a minted token, or ErrMalformedToken.
func ParseToken(s string) (string, error) {
	if len(s) != TokenLen || !strings.HasPrefix(s, TokenPrefix) {
		return "", ErrMalformedToken
	}
	rest := s[len(TokenPrefix):]
	id, secret := rest[:idLen], rest[idLen:]
	if secret[0] != '_' {
		return "", ErrMalformedToken
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", ErrMalformedToken
		}
	}
	if b, err := base64.RawURLEncoding.Strict().DecodeString(secret[1:]); err != nil || len(b) != secretBytes {
		return "", ErrMalformedToken
	}
	return id, nil
}

// LooksMinted reports whether s claims to be a minted token (so the
// authenticator never tries it as a JWT or the bootstrap token).
func LooksMinted(s string) bool { return strings.HasPrefix(s, TokenPrefix) }

// LooksJWT reports whether s has the shape of a compact JWS (three
// base64url segments).
func LooksJWT(s string) bool {
	if strings.Count(s, ".") != 2 {
		return false
	}
	for _, seg := range strings.Split(s, ".") {
		if seg == "" {
			return false
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
