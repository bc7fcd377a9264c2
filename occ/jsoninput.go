package occ

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"unicode/utf8"
)

// ErrBadJSON: a JSON document the user gave does not parse, or holds a
// value of the wrong type. occ exits 2 (usage) with the file, line and
// column.
var ErrBadJSON = errors.New("invalid JSON")

// decodeJSONInput decodes a user's JSON document data, read from name (a
// path, or "stdin"), into v. A syntax or type error becomes an ErrBadJSON
// usage error naming name, the line and the column (1-based, in
// characters) where it is; want says in words what the top-level value
// must be ("an object").
func decodeJSONInput(name string, data []byte, v any, want string) error {
	err := json.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		// Offset counts the bytes read when the error was seen: the
		// offending byte is the last of them, or the input ended.
		at := se.Offset - 1
		if se.Offset >= int64(len(data)) && se.Error() == "unexpected end of JSON input" {
			at = int64(len(data))
		}
		line, col := position(data, at)
		return usageError(fmt.Errorf("%w in %s at line %d, column %d: %s", ErrBadJSON, name, line, col, se.Error()))
	case errors.As(err, &te):
		line, col := position(data, valueStart(data, te.Offset))
		what := "the document"
		if te.Field != "" {
			what = fmt.Sprintf("field %q", te.Field)
			want = jsonKind(te.Type)
		}
		return usageError(fmt.Errorf("%w in %s at line %d, column %d: %s is a JSON %s, want %s", ErrBadJSON, name, line, col,
			what, te.Value, want))
	}
	return usageError(fmt.Errorf("%w in %s: %w", ErrBadJSON, name, err))
}

// position is the 1-based line and column (in characters) of byte offset
// at of data.
func position(data []byte, at int64) (line, col int) {
	at = max(0, min(at, int64(len(data))))
	before := data[:at]
	line = 1 + bytes.Count(before, []byte("\n"))
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	return line, 1 + utf8.RuneCount(before[lineStart:])
}

// valueStart finds where the value ends at end (a type error's Offset)
// begins: json reports the offset after an array's or object's opening
// byte but after the whole of a string, number or literal.
func valueStart(data []byte, end int64) int64 {
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		prev := dec.InputOffset()
		if _, err := dec.Token(); err != nil {
			return max(0, end-1)
		}
		if dec.InputOffset() < end {
			continue
		}
		// The token began after prev's separators and white space.
		for i := prev; i < int64(len(data)); i++ {
			switch data[i] {
			case ' ', '\t', '\r', '\n', ',', ':':
				continue
			}
			return i
		}
		return max(0, end-1)
	}
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8,
		reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "another type"
}

// inputName is how errors name a document read from path.
func inputName(path string) string {
	if path == "-" {
		return "stdin"
	}
	return path
}
