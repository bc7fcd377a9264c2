package gatewayd

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/probe/fakeprovider"
	"oce.dev/oce/shared/contract"
)

// embeddedProbeSetup is an embedded gatewayd with the fake openclaw, the
// fake provider and a model key.
func embeddedProbeSetup(t *testing.T, key, model string) (fakeRun, *fakeprovider.Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	fp, err := fakeprovider.Start(ctx, fakeprovider.Options{ValidKeys: []string{"sk-good-key-123456"}})
	require.NoError(t, err)
	t.Cleanup(func() { fp.Close() })
	f := fakeSetup(t, contract.Embedded)
	writeJSONFile(t, f.env["OPENCLAW_CONFIG_PATH"], map[string]any{
		"agents": map[string]any{"defaults": map[string]any{"model": map[string]any{"primary": model}}}})
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "secrets", "model-api-key"), []byte(key), 0o600))
	f.env["OCE_MODEL_PROVIDER_BASE_URL_OPENAI"] = fp.URL()
	return f, fp
}

// TestProbeOnlyReadyWithoutGateway: a probe-only gatewayd (a staged
// replacement before cutover) runs the model probe alone — upfront check
// and the openclaw probe — reports ready with when it passed, and never
// starts a gateway or touches the Agent's gateway state.
func TestProbeOnlyReadyWithoutGateway(t *testing.T) {
	f, fp := embeddedProbeSetup(t, "sk-good-key-123456", "openai/gpt-fake-1")
	f.env[contract.EnvModelProbeOnly] = "1"
	before := time.Now()
	p := startGW(t, f.dir, f.env)
	p.waitReady(20 * time.Second)
	require.Equal(t, 1, probeRuns(p), "one openclaw probe")
	require.Equal(t, int64(1), fp.UpfrontRequests())
	var doc struct {
		Probe contract.ModelProbeStatus `json:"modelProbe"`
	}
	raw, err := json.Marshal(p.runtimeStatus())
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.Equal(t, "READY", doc.Probe.Code)
	require.GreaterOrEqual(t, doc.Probe.PassedAtMs, before.UnixMilli())
	require.Len(t, p.log.phase(PhaseModelProbe), 1)
	require.Empty(t, p.log.phase(PhaseWorkspaceSetup), "no other phase runs")
	require.Equal(t, 0, f.count("gateway "), "no gateway starts before cutover")
	require.NoDirExists(t, filepath.Join(f.dir, "state"), "the predecessor's gateway state is not touched")
	require.NotContains(t, p.log.String(), "sk-good-key-123456")
	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.waitExit(10*time.Second))
}

// TestProbeOnlyHoldsFailure: a failed probe before cutover is held with
// its code, as at a gateway's start, and nothing else runs.
func TestProbeOnlyHoldsFailure(t *testing.T) {
	for _, tc := range []struct {
		name, key, model, code string
	}{
		{"rejected-key", "sk-bad-key-654321", "openai/gpt-fake-1", "AUTHENTICATION_FAILED"},
		{"probe-timeout", "sk-good-key-123456", "openai/gpt-fake-probe-timeout", "MODEL_PROBE_TIMEOUT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := embeddedProbeSetup(t, tc.key, tc.model)
			f.env[contract.EnvModelProbeOnly] = "1"
			p := startGW(t, f.dir, f.env)
			require.Eventually(t, func() bool { return len(p.log.phase(PhaseModelProbe)) == 1 }, 20*time.Second, 20*time.Millisecond)
			require.Equal(t, tc.code, p.log.phase(PhaseModelProbe)[0]["code"])
			code, out := readyProbe(t, p.statusAddr)
			require.Equal(t, 1, code)
			require.Contains(t, out, "startup check model-probe failed with "+tc.code)
			require.Equal(t, 0, f.count("gateway "))
			p.signal(syscall.SIGTERM)
			require.Equal(t, 0, p.waitExit(10*time.Second))
		})
	}
}

// TestVouchedProbeNotRepeated: at cutover the gateway whose probe passed
// before cutover starts without probing again; a stale vouch (older than
// contract.ModelProbeFreshFor) probes as the seeds order.
func TestVouchedProbeNotRepeated(t *testing.T) {
	for _, tc := range []struct {
		name   string
		age    time.Duration
		probes int
	}{
		{"fresh", time.Second, 0},
		{"stale", contract.ModelProbeFreshFor + time.Minute, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, fp := embeddedProbeSetup(t, "sk-good-key-123456", "openai/gpt-fake-1")
			f.env[contract.EnvModelProbePassedAt] = strconv.FormatInt(time.Now().Add(-tc.age).UnixMilli(), 10)
			p := startGW(t, f.dir, f.env)
			p.waitReady(20 * time.Second)
			require.Equal(t, tc.probes, probeRuns(p))
			require.Equal(t, int64(tc.probes), fp.UpfrontRequests())
			require.Len(t, p.log.phase(PhaseModelProbe), 1, "the phase is still recorded")
			require.Equal(t, "ok", p.log.phase(PhaseModelProbe)[0]["outcome"])
			require.Equal(t, 1, f.count("gateway "))
			p.signal(syscall.SIGTERM)
			require.Equal(t, 0, p.waitExit(15*time.Second))
		})
	}
}

// TestProbeEnvRefused: the probe-before-cutover variables are for embedded
// gateways only, never both at once, and well formed.
func TestProbeEnvRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		topo contract.Topology
		env  map[string]string
	}{
		{"dedicated-probe-only", contract.DedicatedOpenClaw, map[string]string{contract.EnvModelProbeOnly: "1"}},
		{"both", contract.Embedded, map[string]string{contract.EnvModelProbeOnly: "1", contract.EnvModelProbePassedAt: "1"}},
		{"malformed-time", contract.Embedded, map[string]string{contract.EnvModelProbePassedAt: "yesterday"}},
		{"malformed-flag", contract.Embedded, map[string]string{contract.EnvModelProbeOnly: "yes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			t.Setenv(contract.EnvTopology, string(tc.topo))
			t.Setenv(contract.EnvGatewayPassword, "pw")
			t.Setenv(contract.EnvOpenAIAPIKey, "k")
			t.Setenv(contract.EnvSecretsDir, t.TempDir())
			_, err := LoadConfig()
			require.ErrorIs(t, err, ErrBadEnv)
		})
	}
}

// probeRuns counts the openclaw probes gatewayd ran (its
// openclaw.model_probe records; the probe child's environment is its own,
// so the fake CLI cannot record them).
func probeRuns(p *gwProc) int {
	n := 0
	for _, r := range p.log.records() {
		if r["msg"] == "openclaw.model_probe" {
			n++
		}
	}
	return n
}
