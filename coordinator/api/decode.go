package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
)

// DefaultMaxBodyBytes bounds a request body when Config.MaxBodyBytes is zero.
const DefaultMaxBodyBytes = 1 << 20

// decodeStrict decodes exactly one JSON value from data into v, rejecting
// unknown fields, trailing data and a non-object top level.
func decodeStrict(data []byte, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return invalid("request body is empty; a JSON object is required")
	}
	if trimmed[0] != '{' {
		return invalid("request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("malformed request body: %s", cleanJSONError(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("malformed request body: trailing data after the JSON object")
	}
	return exactKeys(trimmed, reflect.TypeOf(v))
}

func cleanJSONError(err error) string {
	return strings.TrimPrefix(err.Error(), "json: ")
}

// readBody reads the whole body up to limit; a larger body is INVALID_REQUEST
// with status 413.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: "INVALID_REQUEST",
				Message: "request body exceeds the size limit", Details: map[string]any{"limit": limit}}
		}
		return nil, invalid("reading request body: %v", err)
	}
	return data, nil
}

// decodeBody reads and strictly decodes the request body into v.
func (s *server) decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	data, err := readBody(w, r, s.maxBody)
	if err != nil {
		return err
	}
	return decodeStrict(data, v)
}

// decodeOptionalBody is decodeBody for routes whose body may be empty.
func (s *server) decodeOptionalBody(w http.ResponseWriter, r *http.Request, v any) error {
	data, err := readBody(w, r, s.maxBody)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	return decodeStrict(data, v)
}

// exactKeys rejects object keys that differ from the struct's JSON names
// (encoding/json matches them case-insensitively), recursing into nested
// struct fields; json.RawMessage fields (native documents) are left alone.
func exactKeys(data []byte, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
	case reflect.Slice:
		if t == rawMessageType {
			return nil
		}
		var items []json.RawMessage
		if json.Unmarshal(data, &items) != nil {
			return nil
		}
		for _, it := range items {
			if err := exactKeys(it, t.Elem()); err != nil {
				return err
			}
		}
		return nil
	default:
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(data, &obj) != nil {
		return nil // null or a type error the decoder already reported
	}
	fields := jsonFields(t)
	for k, v := range obj {
		ft, ok := fields[k]
		if !ok {
			return invalid("malformed request body: unknown field %q", k)
		}
		if err := exactKeys(v, ft); err != nil {
			return err
		}
	}
	return nil
}

var rawMessageType = reflect.TypeOf(json.RawMessage(nil))

// jsonFields maps the exact JSON names of t's fields (embedded structs
// flattened) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
