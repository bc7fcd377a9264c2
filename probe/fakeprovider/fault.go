package fakeprovider

import (
	"net/http"
	"strings"
)

// Fault is a failure the fake provider injects into model requests.
type Fault string

// Faults. The 401-* faults pick the body shape of the 401 answer (the upfront
// check's bodyShape diagnostics); the others act on any request.
const (
	FaultNone               Fault = ""
	Fault401JSONErrorCode   Fault = "401-json-error-code"
	Fault401JSONErrorNoCode Fault = "401-json-error-no-code"
	Fault401JSONNoError     Fault = "401-json-no-error"
	Fault401NonJSON         Fault = "401-non-json"
	Fault401Empty           Fault = "401-empty"
	Fault403                Fault = "403"
	Fault429                Fault = "429"
	Fault500                Fault = "500"
	FaultSlow               Fault = "slow"
	FaultDrop               Fault = "drop"
	FaultResponseFailed     Fault = "response-failed"
)

// Prompt triggers, matched in the last user text.
const (
	Trigger500    = "TRIGGER_500"
	TriggerFailed = "TRIGGER_FAILED"
	TriggerSlow   = "TRIGGER_SLOW"
	TriggerTool   = "TRIGGER_TOOL"
	// TriggerToolFile=NAME: the tool call writes the file NAME ([A-Za-z0-9._-],
	// up to 64) in the tool's working directory, so a test can find where
	// the tool ran (the Harness's workspace, not the Gateway's).
	TriggerToolFile = "TRIGGER_TOOL_FILE="
	Trigger401      = "TRIGGER_401"
)

// UpfrontOnlyKeyPrefix marks keys the provider accepts only on the upfront
// check's empty request (400, like a valid key) and rejects with 401 on
// every model request: a credential a metadata check passes but a real
// model turn refuses. Only the model probe catches it (tests of the probe
// before cutover).
const UpfrontOnlyKeyPrefix = "sk-oce-upfront-only-"

func upfrontOnly(r *http.Request) bool { return strings.HasPrefix(key(r), UpfrontOnlyKeyPrefix) }

var faults = map[Fault]bool{FaultNone: true, Fault401JSONErrorCode: true, Fault401JSONErrorNoCode: true,
	Fault401JSONNoError: true, Fault401NonJSON: true, Fault401Empty: true, Fault403: true, Fault429: true,
	Fault500: true, FaultSlow: true, FaultDrop: true, FaultResponseFailed: true}

// Valid reports whether f is a known fault.
func (f Fault) Valid() bool { return faults[f] }

// Is401 reports whether f answers 401.
func (f Fault) Is401() bool { return strings.HasPrefix(string(f), "401-") }

// triggerFault maps a prompt trigger to its fault ("" when none).
func triggerFault(prompt string) Fault {
	switch {
	case strings.Contains(prompt, Trigger401):
		return Fault401JSONErrorCode
	case strings.Contains(prompt, Trigger500):
		return Fault500
	case strings.Contains(prompt, TriggerFailed):
		return FaultResponseFailed
	case strings.Contains(prompt, TriggerSlow):
		return FaultSlow
	}
	return FaultNone
}

// write401 answers 401 in the body shape f names (json-error-code for any
// other f).
func write401(w http.ResponseWriter, f Fault) {
	switch f {
	case Fault401JSONErrorNoCode:
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{
			"message": "Incorrect API key provided.", "type": "invalid_request_error"}})
	case Fault401JSONNoError:
		writeJSON(w, http.StatusUnauthorized, map[string]any{"detail": "Unauthorized"})
	case Fault401NonJSON:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte("<html><body>401 Authorization Required</body></html>\n"))
	case Fault401Empty:
		w.WriteHeader(http.StatusUnauthorized)
	default:
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{
			"message": "Incorrect API key provided.", "type": "invalid_request_error",
			"code": "invalid_api_key", "param": nil}})
	}
}

// writeStatusFault answers the 403, 429 and 500 faults.
func writeStatusFault(w http.ResponseWriter, f Fault) {
	switch f {
	case Fault403:
		writeJSON(w, http.StatusForbidden, map[string]any{"error": map[string]any{
			"message": "Forbidden.", "type": "permission_error", "code": "unsupported_country_region_territory"}})
	case Fault429:
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{
			"message": "Rate limit reached.", "type": "requests", "code": "rate_limit_exceeded"}})
	default:
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": map[string]any{
			"message": "We're currently experiencing high demand, which may cause temporary errors.",
			"type":    "server_error", "code": nil}})
	}
}
