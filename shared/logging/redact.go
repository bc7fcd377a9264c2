package logging

import (
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Redacted replaces every value or substring judged to be a credential.
const Redacted = "[REDACTED]"

// MinSecretLen is the shortest exact secret a Redactor accepts: shorter
// strings would scrub ordinary words and say nothing useful about a secret.
const MinSecretLen = 4

// secretPattern finds credential-shaped substrings in free text: OpenAI and
// Anthropic keys (sk-, sk-ant-), access tokens (at-), JWTs (ChatGPT access
// tokens), and bearer credentials.
var secretPattern = regexp.MustCompile(
	`\bsk-ant-[A-Za-z0-9_\-]{4,}|\bsk-[A-Za-z0-9_\-]{8,}|\bat-[A-Za-z0-9_\-]{16,}` +
		`|\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*` +
		`|(?i:\bbearer)\s+[A-Za-z0-9._~+/=\-]{4,}`)

// ansiPattern matches terminal colour and cursor escapes (Codex colours its
// stderr when LOG_FORMAT is not json).
var ansiPattern = regexp.MustCompile("\x1b\\[[0-9;?]*[ -/]*[@-~]")

// sensitiveKeyParts mark attribute keys whose string values are credentials.
var sensitiveKeyParts = []string{"key", "token", "password", "passwd", "secret", "authorization", "credential", "cookie"}

// SensitiveKey reports whether an attribute named k carries a credential by
// its name alone (apiKey, accessToken, Authorization, client_secret, …).
func SensitiveKey(k string) bool {
	lk := strings.ToLower(k)
	for _, p := range sensitiveKeyParts {
		if strings.Contains(lk, p) {
			return true
		}
	}
	return false
}

// secretPrefixes start values that are credentials as a whole.
var secretPrefixes = []string{"sk-", "sk-ant-", "at-", "Bearer ", "bearer "}

// LooksLikeSecret reports whether a whole attribute value is a credential:
// one token that starts with a known secret prefix (sk-, sk-ant-, at-) or a
// bearer credential.
func LooksLikeSecret(v string) bool {
	for _, p := range secretPrefixes {
		if rest, ok := strings.CutPrefix(v, p); ok && rest != "" && !strings.ContainsAny(rest, " \t\n") {
			return true
		}
	}
	return false
}

// Redactor scrubs credentials from strings: exact secrets registered with
// Add, and credential-shaped substrings found by pattern. It is safe for
// concurrent use; the zero value is ready and knows no exact secrets.
type Redactor struct {
	mu       sync.Mutex
	secrets  []string
	replacer atomic.Pointer[strings.Replacer]
}

// NewRedactor returns a Redactor that already knows secrets.
func NewRedactor(secrets ...string) *Redactor {
	r := &Redactor{}
	for _, s := range secrets {
		r.Add(s)
	}
	return r
}

// Add registers an exact secret to scrub from every later string. It reports
// false, and registers nothing, for strings shorter than MinSecretLen.
func (r *Redactor) Add(secret string) bool {
	if r == nil || len(secret) < MinSecretLen {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if slices.Contains(r.secrets, secret) {
		return true
	}
	r.secrets = append(r.secrets, secret)
	// Longest first, so a secret that contains another is replaced whole.
	sorted := slices.Clone(r.secrets)
	slices.SortFunc(sorted, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(sorted))
	for _, s := range sorted {
		pairs = append(pairs, s, Redacted)
	}
	r.replacer.Store(strings.NewReplacer(pairs...))
	return true
}

// Scrub returns s with registered secrets and credential-shaped substrings
// replaced by Redacted, and terminal escapes removed.
func (r *Redactor) Scrub(s string) string {
	// Escapes go first: a colour code must not split a secret from its match.
	if strings.IndexByte(s, 0x1b) >= 0 {
		s = ansiPattern.ReplaceAllString(s, "")
	}
	if r != nil {
		if rep := r.replacer.Load(); rep != nil {
			s = rep.Replace(s)
		}
	}
	if !maySecret(s) {
		return s
	}
	return secretPattern.ReplaceAllStringFunc(s, func(m string) string {
		if len(m) > 6 && strings.EqualFold(m[:6], "bearer") {
			return m[:6] + " " + Redacted
		}
		return Redacted
	})
}

// maySecret is a cheap pre-check for secretPattern, which is slow on long
// strings.
func maySecret(s string) bool {
	if strings.Contains(s, "sk-") || strings.Contains(s, "at-") || strings.Contains(s, "eyJ") {
		return true
	}
	for i := strings.IndexAny(s, "bB"); i >= 0 && i+6 <= len(s); {
		if strings.EqualFold(s[i:i+6], "bearer") {
			return true
		}
		j := strings.IndexAny(s[i+1:], "bB")
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

// Contains reports whether s holds anything Scrub would replace.
func (r *Redactor) Contains(s string) bool {
	return r.Scrub(s) != s
}

var defaultRedactor = &Redactor{}

// DefaultRedactor is the process-wide Redactor that New's handlers use.
func DefaultRedactor() *Redactor { return defaultRedactor }

// Scrub registers secret with the process-wide Redactor so that no later log
// record carries it. Call it as soon as a credential is read (stdin, a 0600
// file). It reports false for strings shorter than MinSecretLen.
func Scrub(secret string) bool { return defaultRedactor.Add(secret) }
