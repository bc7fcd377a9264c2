// Package codes holds oce's closed code sets: runtime diagnostic codes, model
// probe codes, Codex failure classes, probe cause kinds, and the mapping from
// a held runtime failure to a revision failure code (docs/design/seed-001.md,
// docs/design/reference.md#s1-8 and #s2). Anything outside a set is
// rejected, never passed through.
package codes

import "regexp"

// Code is an upper-case closed-set code such as AUTHENTICATION_FAILED.
type Code string

var wellFormed = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)

// WellFormed reports whether s has the shape every logged code must have.
func WellFormed(s string) bool { return wellFormed.MatchString(s) }

// Runtime diagnostic codes a held runtime failure may carry.
const (
	LoginFailed          Code = "LOGIN_FAILED"
	ModelProbeFailed     Code = "MODEL_PROBE_FAILED"
	ModelProbeTimeout    Code = "MODEL_PROBE_TIMEOUT"
	ModelProbeCPUStarved Code = "MODEL_PROBE_CPU_STARVED"
	Unavailable          Code = "UNAVAILABLE"
	NotConfigured        Code = "NOT_CONFIGURED"
	AuthenticationFailed Code = "AUTHENTICATION_FAILED"
	Disconnected         Code = "DISCONNECTED"
	IncompatibleResponse Code = "INCOMPATIBLE_RESPONSE"
	ProbeFailed          Code = "PROBE_FAILED"
)

// Ready is the probe code of a model turn that succeeded.
const Ready Code = "READY"

// Plugin failure codes (plugin-install phase).
const (
	PluginNotInCatalog  Code = "PLUGIN_NOT_IN_CATALOG"
	PluginDetailMissing Code = "PLUGIN_DETAIL_MISSING"
	PluginNotReady      Code = "PLUGIN_NOT_READY"
	PluginAuthRequired  Code = "PLUGIN_AUTH_REQUIRED"
)

var runtimeDiagnostic = set(LoginFailed, ModelProbeFailed, ModelProbeTimeout, ModelProbeCPUStarved,
	Unavailable, NotConfigured, AuthenticationFailed, Disconnected, IncompatibleResponse, ProbeFailed,
	PluginNotInCatalog, PluginDetailMissing, PluginNotReady, PluginAuthRequired)

var probe = set(Ready, ModelProbeTimeout, ModelProbeFailed, ModelProbeCPUStarved, AuthenticationFailed, Unavailable)

// IsRuntimeDiagnostic reports whether c belongs to the runtime diagnostic set.
func IsRuntimeDiagnostic(c Code) bool { return runtimeDiagnostic[c] }

// IsProbe reports whether c is a model probe result code.
func IsProbe(c Code) bool { return probe[c] }

// FailureClass is the closed class a failed Codex probe or login logs instead
// of raw provider output.
type FailureClass string

// Failure classes.
const (
	ClassNetwork   FailureClass = "network"
	ClassAuth      FailureClass = "auth"
	ClassTimeout   FailureClass = "timeout"
	ClassServer    FailureClass = "server"
	ClassRateLimit FailureClass = "rate_limit"
	ClassTLS       FailureClass = "tls"
	ClassConfig    FailureClass = "config"
	ClassTool      FailureClass = "tool"
	ClassProtocol  FailureClass = "protocol"
	ClassKilled    FailureClass = "killed"
	ClassUnknown   FailureClass = "unknown"
)

var classes = map[FailureClass]bool{ClassNetwork: true, ClassAuth: true, ClassTimeout: true, ClassServer: true,
	ClassRateLimit: true, ClassTLS: true, ClassConfig: true, ClassTool: true, ClassProtocol: true,
	ClassKilled: true, ClassUnknown: true}

// IsFailureClass reports whether f is in the closed set.
func IsFailureClass(f FailureClass) bool { return classes[f] }

// CauseKind qualifies MODEL_PROBE_FAILED.
type CauseKind string

// Cause kinds.
const (
	CauseProcessExit   CauseKind = "PROCESS_EXIT"
	CauseProbeStatus   CauseKind = "PROBE_STATUS"
	CauseInvalidOutput CauseKind = "INVALID_OUTPUT"
	CauseWrapperError  CauseKind = "WRAPPER_ERROR"
	CauseCodexOutcome  CauseKind = "CODEX_OUTCOME"
)

var causeKinds = map[CauseKind]bool{CauseProcessExit: true, CauseProbeStatus: true, CauseInvalidOutput: true,
	CauseWrapperError: true, CauseCodexOutcome: true}

// IsCauseKind reports whether k is in the closed set.
func IsCauseKind(k CauseKind) bool { return causeKinds[k] }

// Cause explains a MODEL_PROBE_FAILED with a closed kind and a short detail
// (exit-N, signal-SIGKILL, rate_limit, json, turn-failed, …); never provider text.
type Cause struct {
	Kind   CauseKind `json:"kind"`
	Detail string    `json:"detail"`
}

// Revision failure codes the coordinator reports for a held runtime failure.
const (
	RevisionAuthenticationFailed Code = "RUNTIME_AUTHENTICATION_FAILED"
	RevisionCPUStarved           Code = "RUNTIME_CPU_STARVED"
	RevisionModelProbeTimeout    Code = "RUNTIME_MODEL_PROBE_TIMEOUT"
	RevisionModelProbeFailed     Code = "RUNTIME_MODEL_PROBE_FAILED"
	RevisionLoginFailed          Code = "RUNTIME_LOGIN_FAILED"
	RevisionStartupFailed        Code = "RUNTIME_STARTUP_FAILED"
)

// RevisionFailure maps a held runtime code to the revision failure code
// (docs/design/reference.md#s1-8). Codes outside the table map to RUNTIME_STARTUP_FAILED.
func RevisionFailure(held Code) Code {
	switch held {
	case AuthenticationFailed:
		return RevisionAuthenticationFailed
	case ModelProbeCPUStarved:
		return RevisionCPUStarved
	case ModelProbeTimeout:
		return RevisionModelProbeTimeout
	case ModelProbeFailed:
		return RevisionModelProbeFailed
	case LoginFailed:
		return RevisionLoginFailed
	default:
		return RevisionStartupFailed
	}
}

func set(cs ...Code) map[Code]bool {
	m := make(map[Code]bool, len(cs))
	for _, c := range cs {
		m[c] = true
	}
	return m
}
