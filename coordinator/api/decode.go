package api

import (
	kjson "sigs.k8s.io/json"

	"oce.dev/oce/shared/codes"

	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
)

// DefaultMaxBodyBytes bounds a request body when Config.MaxBodyBytes is zero.
const DefaultMaxBodyBytes = 1 << 20

// decodeStrict decodes exactly one JSON object from data into v, rejecting
// unknown, duplicate or differently-cased keys and trailing data.
func decodeStrict(data []byte, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return invalid("request body is empty; a JSON object is required")
	}
	if trimmed[0] != '{' {
		return invalid("request body must be a JSON object")
	}
	// sigs.k8s.io/json: keys match exactly (encoding/json would match them
	// case-insensitively), unknown and duplicate keys are refused, and a
	// trailing value is a syntax error.
	strict, err := kjson.UnmarshalStrict(trimmed, v)
	if err != nil {
		return invalid("malformed request body: %s", cleanJSONError(err))
	}
	if len(strict) > 0 {
		return invalid("malformed request body: %s", cleanJSONError(strict[0]))
	}
	return nil
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
			return nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: codes.InvalidRequest,
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
