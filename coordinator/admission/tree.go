package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"
)

// Limits of a native configuration document.
const (
	// MaxDocumentBytes bounds a stored document; the OpenClaw gateway mounts it
	// from a ConfigMap, whose data is limited to 1 MiB.
	MaxDocumentBytes = 1 << 20
	// MaxDocumentDepth bounds nesting so hostile input cannot exhaust the stack.
	MaxDocumentDepth = 64
)

// parseTree decodes b into a generic tree (map[string]any, []any, string,
// json.Number, bool, nil). It refuses what encoding/json would silently
// accept: invalid UTF-8, duplicate object keys (two parsers could disagree on
// which wins), trailing values, and anything but an object at the top.
func parseTree(b []byte) (map[string]any, error) {
	if len(b) > MaxDocumentBytes {
		return nil, invalid(RuleDocumentSyntax, "the configuration document exceeds %d bytes", MaxDocumentBytes)
	}
	if !utf8.Valid(b) {
		return nil, invalid(RuleDocumentSyntax, "the configuration document is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := parseValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalid(RuleDocumentSyntax, "the configuration document must hold exactly one JSON value")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, invalid(RuleDocumentSyntax, "the configuration document must be a JSON object")
	}
	return obj, nil
}

func parseValue(dec *json.Decoder, depth int) (any, error) {
	if depth > MaxDocumentDepth {
		return nil, invalid(RuleDocumentSyntax, "the configuration document nests deeper than %d levels", MaxDocumentDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, invalid(RuleDocumentSyntax, "the configuration document is not valid JSON")
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := map[string]any{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, invalid(RuleDocumentSyntax, "the configuration document is not valid JSON")
				}
				key, ok := kt.(string)
				if !ok {
					return nil, invalid(RuleDocumentSyntax, "the configuration document is not valid JSON")
				}
				if _, dup := obj[key]; dup {
					return nil, invalid(RuleDocumentSyntax, "the configuration document repeats the key %s in one object", quote(key))
				}
				v, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				obj[key] = v
			}
			if _, err := dec.Token(); err != nil { // '}'
				return nil, invalid(RuleDocumentSyntax, "the configuration document is not valid JSON")
			}
			return obj, nil
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil { // ']'
				return nil, invalid(RuleDocumentSyntax, "the configuration document is not valid JSON")
			}
			return arr, nil
		}
		return nil, invalid(RuleDocumentSyntax, "the configuration document is not valid JSON")
	default:
		return t, nil
	}
}

// canonical renders a tree deterministically: object keys sorted (encoding/json
// sorts map keys), numbers exactly as written, no HTML escaping, no trailing
// newline.
func canonical(tree map[string]any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tree); err != nil {
		return nil, invalid(RuleDocumentSyntax, "the configuration document cannot be encoded")
	}
	return json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n")), nil
}

// deepCopy copies a tree produced by parseTree.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = deepCopy(x)
		}
		return m
	case []any:
		a := make([]any, len(t))
		for i, x := range t {
			a[i] = deepCopy(x)
		}
		return a
	default:
		return v
	}
}

// object returns m[key] as an object; present is false when it is absent.
// path names m[key] in errors.
func object(m map[string]any, key, path string) (o map[string]any, present bool, err error) {
	v, present := m[key]
	if !present {
		return nil, false, nil
	}
	o, isObj := v.(map[string]any)
	if !isObj {
		return nil, true, errShape(path, "an object")
	}
	return o, true, nil
}

// ensureObject returns m[key], creating an empty object when absent. The
// caller has already validated its type.
func ensureObject(m map[string]any, key string) map[string]any {
	if o, ok := m[key].(map[string]any); ok {
		return o
	}
	o := map[string]any{}
	m[key] = o
	return o
}

func errShape(path, want string) *Error {
	return invalid(RuleDocumentShape, "the configuration setting %s must be %s", path, want).with("path", path)
}
