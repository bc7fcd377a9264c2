// Package modelref parses native model references of the form provider/model,
// split at the first slash (model IDs may themselves contain slashes).
package modelref

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid reports a reference that is not provider/model.
var ErrInvalid = errors.New("modelref: invalid model reference")

// Ref is a parsed model reference.
type Ref struct {
	Provider string
	Model    string
}

// String renders the reference in its canonical provider/model form.
func (r Ref) String() string { return r.Provider + "/" + r.Model }

// Parse splits s at its first slash. Both parts must be non-empty and free of
// whitespace and control characters.
func Parse(s string) (Ref, error) {
	i := strings.IndexByte(s, '/')
	if i <= 0 || i == len(s)-1 {
		return Ref{}, fmt.Errorf("%w: %q must be provider/model", ErrInvalid, s)
	}
	r := Ref{Provider: s[:i], Model: s[i+1:]}
	for _, c := range s {
		if c <= ' ' || c == 0x7f {
			return Ref{}, fmt.Errorf("%w: %q contains whitespace or control characters", ErrInvalid, s)
		}
	}
	return r, nil
}

// MatchesCatalogID reports whether a provider catalog entry id names this
// model: either the full reference or the id after the provider's slash.
func (r Ref) MatchesCatalogID(id string) bool {
	return id == r.Model || id == r.String()
}
