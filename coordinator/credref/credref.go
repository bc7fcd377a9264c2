// Package credref is the syntax of a credential reference: how an Agent's
// harnessAuth.sourceRef names a credential source of its own oce Namespace
// (docs/credentials.md, "Credential sources"). The API validates every
// reference with it when an Agent is created or updated, coordinator/policy
// decides deploys over what it parses, and the compute drivers resolve the
// parsed name inside the Agent's Namespace only.
//
// The one syntax is
//
//	credential:[<namespace>/]<name>[#<key>]
//
// <name> is a credential source of the Agent's Namespace (a DNS label),
// <key> one of its keys (without one, the source must hold exactly one),
// and <namespace>, when given, must be the Agent's own Namespace: a
// reference never reaches into another. The spellings of earlier releases
// are read as the same thing, so references stored then keep their meaning
// inside their Namespace:
//
//	secret:<name>#<key>               → credential:<name>#<key>
//	secret://<namespace>/<name>#<key> → credential:<namespace>/<name>#<key>
//	local:<name>                      → credential:<name>
package credref

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Prefixes of the spellings.
const (
	Prefix          = "credential:"
	legacySecret    = "secret:"
	legacySecretURL = "secret://"
	legacyLocal     = "local:"
)

// MaxLen bounds a reference (the API's limit of harnessAuth.sourceRef).
const MaxLen = 512

// ErrSyntax: the text is not a credential reference.
var ErrSyntax = errors.New("credref: not a credential reference")

var (
	label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	// key is a Kubernetes Secret data key.
	key = regexp.MustCompile(`^[-._a-zA-Z0-9]{1,253}$`)
)

// ValidName reports whether name may name a credential source (a DNS label).
func ValidName(name string) bool { return label.MatchString(name) }

// ValidKey reports whether k may name a key of a credential source.
func ValidKey(k string) bool { return key.MatchString(k) && k != "." && k != ".." }

// Ref is a parsed reference.
type Ref struct {
	// Namespace is the Namespace the reference is qualified with; empty:
	// the Agent's own.
	Namespace string
	// Name is the credential source.
	Name string
	// Key is the key of the source; empty: its only key.
	Key string
	// Legacy marks a spelling of an earlier release.
	Legacy bool
}

// String is the reference in the canonical spelling.
func (r Ref) String() string {
	s := Prefix
	if r.Namespace != "" {
		s += r.Namespace + "/"
	}
	s += r.Name
	if r.Key != "" {
		s += "#" + r.Key
	}
	return s
}

// In reports whether the reference may resolve in Namespace ns: it is not
// qualified with another one.
func (r Ref) In(ns string) bool { return r.Namespace == "" || r.Namespace == ns }

// Parse reads a reference in any accepted spelling.
func Parse(s string) (Ref, error) {
	if len(s) > MaxLen {
		return Ref{}, fmt.Errorf("%w: longer than %d bytes", ErrSyntax, MaxLen)
	}
	var (
		r                   Ref
		rest                string
		needsKey, qualified bool
		ok                  bool
	)
	switch {
	case strings.HasPrefix(s, Prefix):
		r.Namespace, rest, qualified = strings.Cut(s[len(Prefix):], "/")
		if !qualified {
			r.Namespace, rest = "", s[len(Prefix):]
		}
	case strings.HasPrefix(s, legacySecretURL):
		r.Legacy, needsKey = true, true
		if r.Namespace, rest, qualified = strings.Cut(s[len(legacySecretURL):], "/"); !qualified {
			return Ref{}, syntax("secret://<namespace>/<name>#<key> names a namespace and a source")
		}
	case strings.HasPrefix(s, legacySecret):
		r.Legacy, needsKey, rest = true, true, s[len(legacySecret):]
	case strings.HasPrefix(s, legacyLocal):
		r.Legacy, rest = true, s[len(legacyLocal):]
		if strings.Contains(rest, "#") {
			return Ref{}, syntax("local:<name> names no key")
		}
	default:
		return Ref{}, syntax("a reference starts with " + Prefix)
	}
	r.Name, r.Key, ok = strings.Cut(rest, "#")
	if ok && r.Key == "" {
		return Ref{}, syntax("an empty key after #")
	}
	if needsKey && !ok {
		return Ref{}, syntax("secret: references name a key after #")
	}
	if qualified && !label.MatchString(r.Namespace) {
		return Ref{}, syntax("the namespace must be a DNS label")
	}
	if !label.MatchString(r.Name) {
		return Ref{}, syntax("the source name must be a DNS label (lower-case letters, digits and '-', at most 63)")
	}
	if ok && !ValidKey(r.Key) {
		return Ref{}, syntax("the key may hold letters, digits, '-', '_' and '.' (at most 253)")
	}
	return r, nil
}

// syntax is ErrSyntax with why; the text itself is not repeated (a
// reference is no secret, but a value pasted by mistake would be).
func syntax(why string) error {
	return fmt.Errorf("%w: %s (the syntax is %s[<namespace>/]<name>[#<key>])", ErrSyntax, why, Prefix)
}

// ErrNoKey: the source holds no key the reference can mean.
var ErrNoKey = errors.New("credref: the credential source holds no such key")

// KeyIn returns the key of a source holding keys that the reference means:
// its own, which the source must hold, or the source's only key.
func (r Ref) KeyIn(keys []string) (string, error) {
	if r.Key != "" {
		if !slices.Contains(keys, r.Key) {
			return "", fmt.Errorf("%w: %q", ErrNoKey, r.Key)
		}
		return r.Key, nil
	}
	if len(keys) != 1 {
		return "", fmt.Errorf("%w: the reference names no key and the source holds %d", ErrNoKey, len(keys))
	}
	return keys[0], nil
}

// Canonical is s in the canonical spelling, or s itself when it is not a
// reference (what policies compare: one spelling for one source).
func Canonical(s string) string {
	if r, err := Parse(s); err == nil {
		return r.String()
	}
	return s
}
