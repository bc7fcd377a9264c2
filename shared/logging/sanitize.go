package logging

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"regexp"

	"oce.dev/oce/shared/codes"
)

// Wrapper event names (docs/design/reference.md#s1-2, docs/design/reference.md#s2) and oce's own additions.
const (
	EventStartupPhase              = "runtime.startup_phase"
	EventOpenClawProbe             = "openclaw.model_probe"
	EventOpenClawProbeStage        = "openclaw.model_probe_stage"
	EventCodexProbe                = "codex.model_probe"
	EventCodexLogin                = "codex.login"
	EventWorkspaceNode             = "runtime.workspace_node"
	EventGatewaySettingsOverridden = "runtime.gateway_settings_overridden"
	EventPeerStatus                = "runtime.peer_status"
	EventGatewayRespawn            = "runtime.gateway_respawn"
)

// Outcomes of a phase or step.
const (
	OutcomeOK     = "ok"
	OutcomeFailed = "failed"
)

// fieldCheck accepts a value and returns what to keep, or false to drop it.
type fieldCheck func(v any) (any, bool)

type field struct {
	name  string
	check fieldCheck
}

var (
	containerRe = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
	phaseRe     = regexp.MustCompile(`^[a-z][a-z0-9-]{0,63}$`)
	signalRe    = regexp.MustCompile(`^SIG[A-Z0-9]{1,12}$`)
	detailRe    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	reasonRe    = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
	headersRe   = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}(,[A-Za-z0-9-]{1,64}){0,15}$`)
	eventRe     = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)
)

func matches(re *regexp.Regexp) fieldCheck {
	return func(v any) (any, bool) {
		s, ok := v.(string)
		return s, ok && re.MatchString(s)
	}
}

func oneOf(vals ...string) fieldCheck {
	return func(v any) (any, bool) {
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		for _, x := range vals {
			if s == x {
				return s, true
			}
		}
		return nil, false
	}
}

func nullable(c fieldCheck) fieldCheck {
	return func(v any) (any, bool) {
		if v == nil {
			return nil, true
		}
		return c(v)
	}
}

// number accepts Go and JSON numbers (not durations, which would be ns).
func number(v any) (any, bool) {
	switch n := v.(type) {
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return n, true
	case float32:
		return n, !math.IsNaN(float64(n)) && !math.IsInf(float64(n), 0)
	case float64:
		return n, !math.IsNaN(n) && !math.IsInf(n, 0)
	case json.Number:
		if _, err := n.Float64(); err != nil {
			return nil, false
		}
		return n, true
	}
	return nil, false
}

func code(v any) (any, bool) {
	switch c := v.(type) {
	case string:
		return c, codes.WellFormed(c)
	case codes.Code:
		return string(c), codes.WellFormed(string(c))
	}
	return nil, false
}

func causeKind(v any) (any, bool) {
	switch c := v.(type) {
	case string:
		return c, codes.IsCauseKind(codes.CauseKind(c))
	case codes.CauseKind:
		return string(c), codes.IsCauseKind(c)
	}
	return nil, false
}

func failureClass(v any) (any, bool) {
	switch c := v.(type) {
	case string:
		return c, codes.IsFailureClass(codes.FailureClass(c))
	case codes.FailureClass:
		return string(c), codes.IsFailureClass(c)
	}
	return nil, false
}

var (
	fContainer    = field{"container", matches(containerRe)}
	fPhase        = field{"phase", matches(phaseRe)}
	fOutcome      = field{"outcome", oneOf(OutcomeOK, OutcomeFailed)}
	fCode         = field{"code", code}
	fCauseKind    = field{"causeKind", causeKind}
	fCauseDetail  = field{"causeDetail", matches(detailRe)}
	fFailureClass = field{"failureClass", failureClass}
	fElapsedMs    = field{"elapsedMs", number}
	fMs           = field{"ms", number}
	fAttempt      = field{"attempt", number}
)

// wrapperFields is the allow-list: for each event, the fields kept and in
// which order they are written.
var wrapperFields = map[string][]field{
	EventStartupPhase: {fContainer, fPhase, fOutcome, fMs, {"sinceStartMs", number}, fCode},
	EventOpenClawProbe: {fElapsedMs, {"capMs", number}, {"cpuWaitMs", nullable(number)}, fCode,
		fCauseKind, fCauseDetail,
		// Seed 001: the upfront 401 check's closed-set diagnostics.
		{"providerCode", matches(detailRe)}, {"responseHeaderMarker", matches(headersRe)},
		{"bodyShape", oneOf("json-error-code", "json-error-no-code", "json-no-error", "non-json", "empty")},
		{"providerErrorCode", matches(detailRe)}, {"providerErrorType", matches(detailRe)}},
	EventOpenClawProbeStage: {{"stage", oneOf("prepare", "preflight", "spawn", "returned", "cleanup", "complete")}},
	EventCodexProbe: {fAttempt, fElapsedMs, {"exitCode", nullable(number)}, {"signal", nullable(matches(signalRe))},
		fCode, fCauseKind, fCauseDetail, fFailureClass},
	EventCodexLogin:                {fOutcome, fCode, fFailureClass, fElapsedMs},
	EventWorkspaceNode:             {fContainer, fOutcome, fCode},
	EventGatewaySettingsOverridden: {fContainer},
	// state: waiting (peer has not reported), unreadable, changed, restored,
	// verified, mismatch; reason is a closed token such as not-published.
	EventPeerStatus: {fContainer, {"state", oneOf("waiting", "unreadable", "changed", "restored", "verified", "mismatch")},
		{"reason", matches(reasonRe)}, fCode},
	EventGatewayRespawn: {fContainer, fOutcome, fAttempt, fMs, fCode},
}

// probeEvents get level error for any code other than READY.
var probeEvents = map[string]bool{EventOpenClawProbe: true, EventCodexProbe: true}

// Sanitize returns a new map holding only the allow-listed fields of a
// wrapper event (docs/design/reference.md#s1-2), each checked for its shape: codes must be
// well-formed, names token-shaped, durations numbers. An unknown event keeps
// only its name; a record without a valid event name yields an empty map.
// For runtime.startup_phase, code is kept only when the outcome is failed.
func Sanitize(event map[string]any) map[string]any {
	out := map[string]any{}
	name, ok := event["event"].(string)
	if !ok || !eventRe.MatchString(name) {
		return out
	}
	out["event"] = name
	for _, f := range wrapperFields[name] {
		v, present := event[f.name]
		if !present {
			continue
		}
		if kept, ok := f.check(v); ok {
			out[f.name] = kept
		}
	}
	if name == EventStartupPhase && out["outcome"] != OutcomeFailed {
		delete(out, "code")
	}
	return out
}

// EventLevel is the level of a wrapper event: error when its outcome is
// failed or a probe event carries a code other than READY, else info.
func EventLevel(event map[string]any) slog.Level {
	if event["outcome"] == OutcomeFailed {
		return slog.LevelError
	}
	name, _ := event["event"].(string)
	if probeEvents[name] {
		if c, ok := event["code"]; ok {
			if s, _ := code(c); s != string(codes.Ready) {
				return slog.LevelError
			}
		}
	}
	return slog.LevelInfo
}

// Event writes a wrapper event as one record: msg is the event name and the
// fields are exactly those Sanitize keeps, in allow-list order, at the level
// EventLevel gives.
func Event(ctx context.Context, l *slog.Logger, event map[string]any) {
	s := Sanitize(event)
	name, _ := s["event"].(string)
	if name == "" {
		return
	}
	attrs := make([]slog.Attr, 0, len(s))
	attrs = append(attrs, slog.String("event", name))
	for _, f := range wrapperFields[name] {
		if v, ok := s[f.name]; ok {
			attrs = append(attrs, slog.Any(f.name, v))
		}
	}
	l.LogAttrs(ctx, EventLevel(s), name, attrs...)
}
