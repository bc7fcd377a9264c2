package upfront

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"strings"
)

// BodyShape is the closed shape of a 401 body (docs/design/seed-001.md).
type BodyShape string

// Body shapes.
const (
	ShapeJSONErrorCode   BodyShape = "json-error-code"
	ShapeJSONErrorNoCode BodyShape = "json-error-no-code"
	ShapeJSONNoError     BodyShape = "json-no-error"
	ShapeNonJSON         BodyShape = "non-json"
	ShapeEmpty           BodyShape = "empty"
)

// markerHeaders are the response header names reported by name; any other
// non-generic header is reported as "other". Values are never read.
var markerHeaders = map[string]bool{
	"x-request-id": true, "request-id": true, "www-authenticate": true, "openai-organization": true,
	"openai-project": true, "openai-version": true, "openai-processing-ms": true,
	"anthropic-organization-id": true, "cf-ray": true, "x-amzn-requestid": true, "via": true,
	"x-envoy-upstream-service-time": true, "proxy-authenticate": true,
}

// genericHeaders carry no origin information and are not reported at all.
var genericHeaders = map[string]bool{
	"content-type": true, "content-length": true, "date": true, "connection": true, "keep-alive": true,
	"transfer-encoding": true, "vary": true, "cache-control": true, "pragma": true, "expires": true,
	"server": true, "alt-svc": true, "strict-transport-security": true, "x-content-type-options": true,
	"set-cookie": true, "content-encoding": true, "access-control-allow-origin": true,
}

// errorCodes and errorTypes are the provider error.code / error.type values
// reported verbatim; anything else is "other".
var errorCodes = map[string]bool{
	"invalid_api_key": true, "invalid_authentication": true, "invalid_organization": true,
	"invalid_project": true, "mismatched_organization": true, "mismatched_project": true,
	"account_deactivated": true, "insufficient_quota": true, "unsupported_country_region_territory": true,
	"api_key_expired": true, "expired_api_key": true, "authentication_error": true,
	"invalid_request_error": true, "permission_error": true, "unauthorized": true,
}

var errorTypes = map[string]bool{
	"invalid_request_error": true, "authentication_error": true, "permission_error": true,
	"invalid_authentication": true, "insufficient_quota": true, "rate_limit_error": true,
	"server_error": true, "api_error": true, "overloaded_error": true, "not_found_error": true,
	"requests": true, "tokens": true, "unauthorized": true,
}

type diagnosis struct {
	marker    string
	shape     BodyShape
	code, typ string
}

func diagnose(h http.Header, body []byte) diagnosis {
	return diagnosis{marker: headerMarker(h), shape: bodyShape(body), code: errField(body, "code", errorCodes),
		typ: errField(body, "type", errorTypes)}
}

// headerMarker lists allow-listed header names (sorted), plus "other" when
// a non-generic header outside the list is present.
func headerMarker(h http.Header) string {
	var names []string
	other := false
	for k := range h {
		k = strings.ToLower(k)
		switch {
		case markerHeaders[k]:
			names = append(names, k)
		case !genericHeaders[k]:
			other = true
		}
	}
	sort.Strings(names)
	if other {
		names = append(names, "other")
	}
	return strings.Join(names, ",")
}

func bodyShape(body []byte) BodyShape {
	b := bytes.TrimSpace(body)
	if len(b) == 0 {
		return ShapeEmpty
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		return ShapeNonJSON
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return ShapeJSONNoError
	}
	e, ok := obj["error"]
	if !ok || e == nil {
		return ShapeJSONNoError
	}
	if eo, ok := e.(map[string]any); ok {
		switch c := eo["code"].(type) {
		case string:
			if c != "" {
				return ShapeJSONErrorCode
			}
		case float64:
			return ShapeJSONErrorCode
		}
	}
	return ShapeJSONErrorNoCode
}

// errField maps error.<field> into the closed set: "" when missing, "other"
// when outside it.
func errField(body []byte, field string, set map[string]bool) string {
	var v map[string]any
	if json.Unmarshal(bytes.TrimSpace(body), &v) != nil {
		return ""
	}
	e, _ := v["error"].(map[string]any)
	if e == nil {
		return ""
	}
	raw, ok := e[field]
	if !ok {
		return ""
	}
	return fieldValue(raw, set)
}

// fieldValue maps one error.code / error.type value: "" when null or an
// empty string, the value when in the set, else "other".
func fieldValue(raw any, set map[string]bool) string {
	s, isString := raw.(string)
	switch {
	case raw == nil, isString && s == "":
		return ""
	case isString && set[s]:
		return s
	}
	return "other"
}

// diagnoseLong classifies a 401 body longer than maxBody from its first
// bytes, read token by token: the top-level members in reach are seen, and
// of an "error" object its code and type. Whatever the cut leaves unread is
// treated as absent.
func diagnoseLong(h http.Header, body io.Reader) diagnosis {
	d := diagnosis{marker: headerMarker(h)}
	s := scanBody(body)
	switch {
	case s.empty:
		d.shape = ShapeEmpty
	case !s.json:
		d.shape = ShapeNonJSON
	case !s.errObject && s.errScalar:
		d.shape = ShapeJSONErrorNoCode
	case !s.errObject:
		d.shape = ShapeJSONNoError
	case s.hasCode:
		d.shape = ShapeJSONErrorCode
	default:
		d.shape = ShapeJSONErrorNoCode
	}
	if s.errObject {
		d.code = fieldValue(s.code, errorCodes)
		d.typ = fieldValue(s.typ, errorTypes)
	}
	return d
}

// composite stands for an object or array value: neither a string nor a
// number, so "other".
type composite struct{}

// scanned is what scanBody saw.
type scanned struct {
	empty, json          bool
	errObject, errScalar bool // the last "error" member is an object / a non-null scalar or array
	hasCode              bool // error.code is a non-empty string or a number
	code, typ            any  // error.code / error.type values (nil when absent)
}

func scanBody(r io.Reader) (s scanned) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		s.empty = errors.Is(err, io.EOF)
		return s
	}
	s.json = true
	if tok != json.Delim('{') {
		return s
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return s
		}
		if key != "error" {
			if skipValue(dec) != nil {
				return s
			}
			continue
		}
		// A later "error" member replaces an earlier one, as in a full decode.
		s.errObject, s.errScalar, s.hasCode, s.code, s.typ = false, false, false, nil, nil
		v, err := dec.Token()
		if err != nil {
			return s
		}
		switch v {
		case json.Delim('{'):
			s.errObject = true
			if !scanError(dec, &s) {
				return s
			}
		case json.Delim('['):
			s.errScalar = true
			if skipRest(dec) != nil {
				return s
			}
		case nil:
		default:
			s.errScalar = true
		}
	}
	return s
}

// scanError reads the members of an error object (its "{" consumed); false
// when the body ended first.
func scanError(dec *json.Decoder, s *scanned) bool {
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return false
		}
		if key != "code" && key != "type" {
			if skipValue(dec) != nil {
				return false
			}
			continue
		}
		v, err := dec.Token()
		if err != nil {
			return false
		}
		if _, ok := v.(json.Delim); ok {
			v = composite{}
			if skipRest(dec) != nil {
				return false
			}
		}
		if key == "code" {
			s.code = v
			str, isString := v.(string)
			_, isNumber := v.(json.Number)
			s.hasCode = isNumber || isString && str != ""
		} else {
			s.typ = v
		}
	}
	_, err := dec.Token() // the closing "}"
	return err == nil
}

// skipValue consumes one value.
func skipValue(dec *json.Decoder) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t == json.Delim('{') || t == json.Delim('[') {
		return skipRest(dec)
	}
	return nil
}

// skipRest consumes the rest of an object or array whose opening delimiter
// was read.
func skipRest(dec *json.Decoder) error {
	for depth := 1; depth > 0; {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}
