package credref

import (
	"strings"
	"testing"
)

// FuzzParse: any text either parses into a reference whose canonical
// spelling parses back to it, or is refused with ErrSyntax; a parsed name
// and namespace are DNS labels and a key never holds a path separator.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"credential:model", "credential:team/model#key", "secret:model#key",
		"secret://team/model#key", "local:demo-key", "credential:a/b/c", "local:../x", "secret://x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			if !strings.Contains(err.Error(), ErrSyntax.Error()) {
				t.Fatalf("%q: %v is not a syntax error", s, err)
			}
			return
		}
		if !ValidName(r.Name) || r.Namespace != "" && !ValidName(r.Namespace) {
			t.Fatalf("%q parsed into %+v", s, r)
		}
		if r.Key != "" && (!ValidKey(r.Key) || strings.ContainsAny(r.Key, "/#")) {
			t.Fatalf("%q: key %q", s, r.Key)
		}
		back, err := Parse(r.String())
		if err != nil {
			t.Fatalf("%q: canonical %q: %v", s, r.String(), err)
		}
		r.Legacy = false
		if back != r {
			t.Fatalf("%q: %+v round-trips to %+v", s, r, back)
		}
	})
}
