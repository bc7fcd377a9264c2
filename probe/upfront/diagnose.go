package upfront

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
)

// BodyShape is the closed shape of a 401 body (seed 001).
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
	var v struct {
		Error map[string]any `json:"error"`
	}
	if json.Unmarshal(bytes.TrimSpace(body), &v) != nil || v.Error == nil {
		return ""
	}
	raw, ok := v.Error[field]
	if !ok || raw == nil {
		return ""
	}
	s, isString := raw.(string)
	switch {
	case isString && s == "":
		return ""
	case isString && set[s]:
		return s
	}
	return "other"
}
