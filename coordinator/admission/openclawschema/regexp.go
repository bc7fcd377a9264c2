package openclawschema

import (
	"time"

	"github.com/dlclark/regexp2/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// matchTimeout bounds one pattern match (the engine backtracks; documents
// are bounded by admission's size and depth limits).
const matchTimeout = 100 * time.Millisecond

// regexpEngine compiles the schema's patterns as ECMAScript (the pinned
// schema's patterns use lookaheads RE2 lacks). A pattern that cannot
// compile is an error at load, never silently accepted.
func regexpEngine(s string) (jsonschema.Regexp, error) {
	re, err := regexp2.Compile(s, regexp2.ECMAScript|regexp2.Unicode)
	if err != nil {
		// \p{…} classes need the Unicode flag only; some engines refuse
		// the ECMAScript flag with them.
		if re, err = regexp2.Compile(s, regexp2.Unicode); err != nil {
			return nil, err
		}
	}
	re.MatchTimeout = matchTimeout
	return ecma{re}, nil
}

type ecma struct{ re *regexp2.Regexp }

func (e ecma) String() string { return e.re.String() }

// MatchString reports a match; a timed-out match is no match (the value is
// refused).
func (e ecma) MatchString(s string) bool {
	ok, err := e.re.MatchString(s)
	return err == nil && ok
}
