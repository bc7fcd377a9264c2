// Package openclawschema validates native OpenClaw configuration documents
// against the pinned runtime's own JSON schema (draft-07), the one
// `openclaw config schema` prints and the gateway applies at start. The
// schema is derived from the installed runtime by Generate (go generate;
// never hand-copied), embedded gzipped, and a test regenerates it and fails
// on drift.
package openclawschema

//go:generate go run ./gen

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var printer = message.NewPrinter(language.English)

//go:embed openclaw.schema.json.gz
var embedded []byte

// Embedded returns the embedded schema bytes (gzipped canonical JSON).
func Embedded() []byte { return embedded }

// Violation is the first way a document breaks the schema: the dotted JSON
// path of the offending value (for an unknown key, the key's own path) and
// a short message.
type Violation struct {
	Path    string
	Unknown bool // an unknown key (additionalProperties false)
	Message string
}

func (v *Violation) Error() string { return v.Path + ": " + v.Message }

var (
	once     sync.Once
	compiled *jsonschema.Schema
	errLoad  error
)

const schemaURL = "https://oce.invalid/openclaw.schema.json"

func load() (*jsonschema.Schema, error) {
	once.Do(func() { compiled, errLoad = compile() })
	return compiled, errLoad
}

// compile decodes and compiles the embedded schema.
func compile() (*jsonschema.Schema, error) {
	zr, err := gzip.NewReader(bytes.NewReader(embedded))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.UseRegexpEngine(regexpEngine)
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemaURL)
}

// Warm compiles the schema now (it takes seconds on a loaded machine) so the
// first Validate does not pay for it; the coordinator calls it in the
// background at start. Repeated calls are free.
func Warm() error {
	_, err := load()
	return err
}

// Validate checks doc (one JSON object) against the schema; a *Violation
// names the first offending path.
func Validate(doc []byte) error {
	s, err := load()
	if err != nil {
		return fmt.Errorf("openclawschema: %w", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return &Violation{Path: "", Message: "not JSON"}
	}
	err = s.Validate(inst)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	if v := violation(ve, inst); v != nil {
		return v
	}
	return nil
}

// envReference matches a ${VAR} substitution the runtime resolves before
// its schema check: such a value cannot be judged here.
var envReference = regexp.MustCompile(`\$\{[A-Z_][A-Z0-9_]*(?::-[^${}]*)?\}`)

// deferred reports whether the instance value at loc is a string the
// runtime substitutes first.
func deferred(inst any, loc []string) bool {
	v := inst
	for _, t := range loc {
		switch c := v.(type) {
		case map[string]any:
			v = c[t]
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) {
				return false
			}
			v = c[i]
		default:
			return false
		}
	}
	s, ok := v.(string)
	return ok && envReference.MatchString(s)
}

// violation picks the deepest, most specific leaf: an unknown key wins. A
// leaf at a ${VAR} value is left to the runtime; nil when only such leaves
// remain. (A failed anyOf/oneOf lists each branch's leaves: the deepest
// one names the offending setting.)
func violation(ve *jsonschema.ValidationError, inst any) *Violation {
	var best *Violation
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		if deferred(inst, e.InstanceLocation) {
			return
		}
		v := leaf(e)
		if best == nil || (v.Unknown && !best.Unknown) || (v.Unknown == best.Unknown && depth(v.Path) > depth(best.Path)) {
			best = v
		}
	}
	walk(ve)
	return best
}

func depth(p string) int { return strings.Count(p, ".") + strings.Count(p, "[") }

func leaf(e *jsonschema.ValidationError) *Violation {
	base := dotted(e.InstanceLocation)
	if ap, ok := e.ErrorKind.(*kind.AdditionalProperties); ok && len(ap.Properties) > 0 {
		props := append([]string(nil), ap.Properties...)
		sort.Strings(props)
		return &Violation{Path: join(base, props[0]), Unknown: true,
			Message: fmt.Sprintf("unknown key %q: the pinned OpenClaw rejects it at start", props[0])}
	}
	return &Violation{Path: base, Message: e.ErrorKind.LocalizedString(printer)}
}

// dotted renders a JSON pointer's tokens as a.b[0].c (keys that are not
// identifiers are quoted).
func dotted(toks []string) string {
	p := ""
	for _, t := range toks {
		p = join(p, t)
	}
	return p
}

func join(p, key string) string {
	if isIndex(key) {
		return p + "[" + key + "]"
	}
	if !isIdent(key) {
		b, _ := json.Marshal(key)
		return p + "[" + string(b) + "]"
	}
	if p == "" {
		return key
	}
	return p + "." + key
}

func isIndex(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r == '$' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
