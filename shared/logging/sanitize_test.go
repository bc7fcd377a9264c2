package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/codes"
)

func TestSanitizeAllowList(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   map[string]any
		want map[string]any
	}{
		{
			name: "startup phase ok drops code and extras",
			in: map[string]any{"event": EventStartupPhase, "container": "gateway", "phase": "model-probe",
				"outcome": "ok", "ms": 12, "sinceStartMs": 40, "code": "READY", "model": "openai/gpt-5",
				"path": "/home/node/.openclaw", "apiKey": "sk-abcdefghijkl"},
			want: map[string]any{"event": EventStartupPhase, "container": "gateway", "phase": "model-probe",
				"outcome": "ok", "ms": 12, "sinceStartMs": 40},
		},
		{
			name: "startup phase failed keeps well-formed code",
			in: map[string]any{"event": EventStartupPhase, "container": "agent", "phase": "codex-login",
				"outcome": "failed", "ms": 1.0, "sinceStartMs": 2.0, "code": codes.LoginFailed},
			want: map[string]any{"event": EventStartupPhase, "container": "agent", "phase": "codex-login",
				"outcome": "failed", "ms": 1.0, "sinceStartMs": 2.0, "code": "LOGIN_FAILED"},
		},
		{
			name: "malformed values dropped",
			in: map[string]any{"event": EventStartupPhase, "container": "/etc/passwd", "phase": "Model Probe",
				"outcome": "maybe", "ms": "12", "sinceStartMs": math.NaN(), "code": "bad-code"},
			want: map[string]any{"event": EventStartupPhase},
		},
		{
			name: "durations are not milliseconds",
			in:   map[string]any{"event": EventStartupPhase, "ms": time.Second},
			want: map[string]any{"event": EventStartupPhase},
		},
		{
			name: "openclaw probe",
			in: map[string]any{"event": EventOpenClawProbe, "elapsedMs": 900, "capMs": 65000, "cpuWaitMs": nil,
				"code": "MODEL_PROBE_FAILED", "causeKind": "PROBE_STATUS", "causeDetail": "rate_limit",
				"provider": "openai", "output": "raw provider text", "bodyShape": "json-error-code",
				"responseHeaderMarker": "x-request-id,openai-organization", "providerErrorCode": "invalid_api_key"},
			want: map[string]any{"event": EventOpenClawProbe, "elapsedMs": 900, "capMs": 65000, "cpuWaitMs": nil,
				"code": "MODEL_PROBE_FAILED", "causeKind": "PROBE_STATUS", "causeDetail": "rate_limit",
				"bodyShape": "json-error-code", "responseHeaderMarker": "x-request-id,openai-organization",
				"providerErrorCode": "invalid_api_key"},
		},
		{
			name: "openclaw probe rejects off-set enums",
			in: map[string]any{"event": EventOpenClawProbe, "causeKind": "EXIT", "bodyShape": "html",
				"causeDetail": "has space", "responseHeaderMarker": "a b"},
			want: map[string]any{"event": EventOpenClawProbe},
		},
		{
			name: "codex probe",
			in: map[string]any{"event": EventCodexProbe, "attempt": 2, "elapsedMs": 30000, "exitCode": nil,
				"signal": "SIGKILL", "code": "MODEL_PROBE_TIMEOUT", "failureClass": "timeout", "stderr": "x"},
			want: map[string]any{"event": EventCodexProbe, "attempt": 2, "elapsedMs": 30000, "exitCode": nil,
				"signal": "SIGKILL", "code": "MODEL_PROBE_TIMEOUT", "failureClass": "timeout"},
		},
		{
			name: "codex probe bad signal and class",
			in:   map[string]any{"event": EventCodexProbe, "signal": "kill", "failureClass": "Network", "exitCode": json.Number("1")},
			want: map[string]any{"event": EventCodexProbe, "exitCode": json.Number("1")},
		},
		{
			name: "workspace node",
			in:   map[string]any{"event": EventWorkspaceNode, "container": "gateway", "outcome": "failed", "code": "GATEWAY_UNAVAILABLE", "reason": "x"},
			want: map[string]any{"event": EventWorkspaceNode, "container": "gateway", "outcome": "failed", "code": "GATEWAY_UNAVAILABLE"},
		},
		{
			name: "settings overridden",
			in:   map[string]any{"event": EventGatewaySettingsOverridden, "container": "gateway", "settings": []string{"a"}},
			want: map[string]any{"event": EventGatewaySettingsOverridden, "container": "gateway"},
		},
		{
			name: "probe stage",
			in:   map[string]any{"event": EventOpenClawProbeStage, "stage": "spawn", "pid": 4},
			want: map[string]any{"event": EventOpenClawProbeStage, "stage": "spawn"},
		},
		{
			name: "probe stage unknown",
			in:   map[string]any{"event": EventOpenClawProbeStage, "stage": "other"},
			want: map[string]any{"event": EventOpenClawProbeStage},
		},
		{
			name: "peer status",
			in: map[string]any{"event": EventPeerStatus, "container": "gateway", "state": "waiting", "reason": "not-published",
				"url": "http://10.0.0.1:18791/"},
			want: map[string]any{"event": EventPeerStatus, "container": "gateway", "state": "waiting", "reason": "not-published"},
		},
		{
			name: "gateway respawn",
			in:   map[string]any{"event": EventGatewayRespawn, "container": "gateway", "outcome": "ok", "attempt": 1, "ms": 5000},
			want: map[string]any{"event": EventGatewayRespawn, "container": "gateway", "outcome": "ok", "attempt": 1, "ms": 5000},
		},
		{
			name: "codex login",
			in:   map[string]any{"event": EventCodexLogin, "outcome": "failed", "code": "LOGIN_FAILED", "failureClass": "auth", "mode": "api_key"},
			want: map[string]any{"event": EventCodexLogin, "outcome": "failed", "code": "LOGIN_FAILED", "failureClass": "auth"},
		},
		{
			name: "unknown event keeps only its name",
			in:   map[string]any{"event": "something.else", "container": "gateway", "code": "X"},
			want: map[string]any{"event": "something.else"},
		},
		{
			name: "malformed event name",
			in:   map[string]any{"event": "/home/node/secret path", "container": "gateway"},
			want: map[string]any{},
		},
		{name: "no event", in: map[string]any{"container": "gateway"}, want: map[string]any{}},
		{name: "nil map", in: nil, want: map[string]any{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Sanitize(tc.in))
		})
	}
}

func TestSanitizeDoesNotModifyInput(t *testing.T) {
	in := map[string]any{"event": EventStartupPhase, "outcome": "ok", "code": "X", "extra": 1}
	Sanitize(in)
	require.Len(t, in, 4)
}

func TestEventLevel(t *testing.T) {
	for _, tc := range []struct {
		in   map[string]any
		want slog.Level
	}{
		{map[string]any{"event": EventStartupPhase, "outcome": "ok"}, slog.LevelInfo},
		{map[string]any{"event": EventStartupPhase, "outcome": "failed"}, slog.LevelError},
		{map[string]any{"event": EventWorkspaceNode, "outcome": "failed"}, slog.LevelError},
		{map[string]any{"event": EventCodexProbe, "code": "READY"}, slog.LevelInfo},
		{map[string]any{"event": EventCodexProbe, "code": codes.Ready}, slog.LevelInfo},
		{map[string]any{"event": EventCodexProbe, "code": "MODEL_PROBE_TIMEOUT"}, slog.LevelError},
		{map[string]any{"event": EventOpenClawProbe, "code": "AUTHENTICATION_FAILED"}, slog.LevelError},
		{map[string]any{"event": EventOpenClawProbe}, slog.LevelInfo},
		{map[string]any{"event": EventOpenClawProbeStage, "stage": "spawn"}, slog.LevelInfo},
		{map[string]any{"event": EventPeerStatus, "code": "UNAVAILABLE"}, slog.LevelInfo},
	} {
		require.Equal(t, tc.want, EventLevel(tc.in), "%v", tc.in)
	}
}

func TestEventRecord(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(NewRedactingHandler(slog.NewJSONHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}), nil))
	Event(context.Background(), l, map[string]any{"event": EventCodexProbe, "code": "AUTHENTICATION_FAILED",
		"attempt": 1, "elapsedMs": 812, "exitCode": 1, "signal": nil, "model": "gpt-5", "apiKey": "sk-abcdefghijk"})
	Event(context.Background(), l, map[string]any{"no": "event"})
	require.Equal(t,
		`{"level":"ERROR","msg":"codex.model_probe","event":"codex.model_probe","attempt":1,"elapsedMs":812,"exitCode":1,"signal":null,"code":"AUTHENTICATION_FAILED"}`+"\n",
		buf.String())
}

// FuzzSanitize checks that whatever a log line holds, Sanitize keeps only
// allow-listed, well-shaped fields and never panics.
func FuzzSanitize(f *testing.F) {
	f.Add(`{"event":"runtime.startup_phase","container":"gateway","phase":"model-probe","outcome":"failed","ms":1,"sinceStartMs":2,"code":"UNAVAILABLE"}`)
	f.Add(`{"event":"codex.model_probe","attempt":1,"signal":"SIGKILL","exitCode":null}`)
	f.Add(`{"event":"x","a":[1,2,{"b":null}]}`)
	f.Add(`{"event":7}`)
	f.Fuzz(func(t *testing.T, line string) {
		d := json.NewDecoder(bytes.NewReader([]byte(line)))
		d.UseNumber()
		var m map[string]any
		if d.Decode(&m) != nil {
			return
		}
		out := Sanitize(m)
		if len(out) == 0 {
			return
		}
		name := out["event"].(string)
		allowed := map[string]bool{"event": true}
		for _, f := range wrapperFields[name] {
			allowed[f.name] = true
		}
		for k, v := range out {
			if !allowed[k] {
				t.Fatalf("field %q kept for %q", k, name)
			}
			if k == "code" && !codes.WellFormed(v.(string)) {
				t.Fatalf("malformed code kept: %q", v)
			}
			switch v.(type) {
			case map[string]any, []any:
				t.Fatalf("structured value kept for %q", k)
			}
		}
		_ = EventLevel(out)
	})
}
