package containertest

import (
	"context"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/gatewayd"
	"oce.dev/oce/internal/poll"
	"oce.dev/oce/occ"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/logtest"
	"oce.dev/oce/shared/runtimes"
	"oce.dev/oce/shared/supervise"
)

const (
	goodKey = "sk-fake-image-good-0123456789"
	badKey  = "sk-fake-image-bad-9876543210"
	reply   = "pong from the offline provider"
	// gatewayReady bounds a real OpenClaw start in a container (model probe
	// included) on a loaded 2-core machine; the driver's startupProbe
	// allows 900 s.
	gatewayReady = 300 * time.Second
)

func embeddedRev(id string) state.Revision {
	return state.Revision{ID: id, AgentID: "agent-img", NamespaceID: "ns-img", Mode: state.ModeEmbedded,
		Harness:     state.HarnessIdentity{ID: state.HarnessOpenClaw, Version: "2026.9.6"},
		Document:    []byte(`{"agents":{"defaults":{"model":{"primary":"openai/gpt-fake-1"}}}}`),
		HarnessAuth: &state.HarnessAuth{Method: "api_key", CredentialKind: "secret", SourceRef: "secret:model#key"}}
}

// The gateway image runs the embedded Gateway Pod the driver renders: tini
// PID 1, uid 1000, read-only root, kubelet's secret layout accepted, the real
// OpenClaw gateway ready by the driver's exec probe, a message answered by
// the fake provider, the gateway child's SIGKILL answered by a respawn, and
// SIGTERM to PID 1 ending the container with 0 within the stop budget.
func TestGatewayImageEmbedded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fp := startProvider(t)

	r := render(t, embeddedRev("rev-good"), map[string][]byte{contract.SecretModelAPIKey: []byte(goodKey)}, kubernetes.RoleGateway)
	log := &logtest.Buffer{}
	// Node reports each compile-cache lookup (the gateway child inherits
	// the variable; the model probe does not)
	p := podOf(t, r, r.claims(t), log, "OCE_MODEL_PROVIDER_BASE_URL_OPENAI="+fp.URL(), "NODE_DEBUG_NATIVE=COMPILE_CACHE")
	start := time.Now()
	c := startContainer(t, p, r.container)
	waitProbe(t, p, c, gatewayReady)
	t.Logf("gateway container ready in %s", time.Since(start).Round(time.Millisecond))
	requireCompileCacheHits(t, log)
	sup := requireKubeletShape(t, p, c, "gatewayd")

	// a message gets the fake provider's reply through the real gateway
	password := r.secret(t, contract.SecretGatewayPassword)
	cctx, ccancel := context.WithTimeout(ctx, 2*time.Minute)
	defer ccancel()
	before := fp.Requests()
	text, err := occ.Chat(cctx, fmt.Sprintf("ws://127.0.0.1:%d", contract.GatewayPort), password, "main", "hello from a container", io.Discard, nil)
	require.NoError(t, err)
	require.Contains(t, text, reply)
	require.Greater(t, fp.Requests(), before)

	// SIGKILL of the gateway's group: gatewayd respawns it (respawn policy)
	kids := children(sup)
	require.Len(t, kids, 1, "gatewayd runs one gateway")
	require.NoError(t, syscall.Kill(-kids[0], syscall.SIGKILL))
	require.Eventually(t, func() bool {
		for _, rec := range records(log, "gatewayd") {
			if rec["msg"] == "runtime.startup_phase" && rec["phase"] == gatewayd.PhaseGatewayRespawn {
				return true
			}
		}
		return false
	}, gatewayReady, 500*time.Millisecond, "a gateway-respawn phase record")
	waitProbe(t, p, c, gatewayReady)
	require.NotEqual(t, kids, children(sup))

	// SIGTERM to PID 1 (what kubelet's stop does): exit 0 within the budget
	took := stopContainer(t, c, supervise.GatewayStopBudget)
	t.Logf("gateway container stopped in %s", took.Round(time.Millisecond))

	logs := log.String()
	require.NotContains(t, logs, goodKey)
	require.NotContains(t, logs, password)
}

// A bad key is held: the probe the driver renders keeps failing with
// AUTHENTICATION_FAILED and its polls cause no model request; SIGTERM still
// ends the container with 0.
func TestGatewayImageBadKeyHeld(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fp := startProvider(t)
	r := render(t, embeddedRev("rev-bad"), map[string][]byte{contract.SecretModelAPIKey: []byte(badKey)}, kubernetes.RoleGateway)
	log := &logtest.Buffer{}
	p := podOf(t, r, r.claims(t), log, "OCE_MODEL_PROVIDER_BASE_URL_OPENAI="+fp.URL())
	c := startContainer(t, p, r.container)
	spec, _ := p.Spec(r.container)
	var out string
	poll.Until(t, func() bool {
		o, code, err := c.Probe(ctx, spec.ReadinessProbe)
		out = o
		require.NoError(t, err)
		require.NotEqual(t, 0, code, "never ready with a bad key")
		return strings.Contains(out, "AUTHENTICATION_FAILED")
	}, gatewayReady, time.Duration(spec.ReadinessProbe.PeriodSeconds)*time.Second, "held AUTHENTICATION_FAILED")
	all := func() int64 { return fp.Requests() + fp.UpfrontRequests() + fp.PrewarmRequests() }
	requests := all()
	require.Positive(t, requests, "the startup check reached the provider")
	for range 3 {
		o, code, err := c.Probe(ctx, spec.ReadinessProbe)
		require.NoError(t, err)
		require.Equal(t, 1, code)
		require.Contains(t, o, "AUTHENTICATION_FAILED")
	}
	require.Equal(t, requests, all(), "readiness polls make no model requests")
	select {
	case <-c.Done():
		t.Fatal("a held failure keeps the container running")
	default:
	}
	stopContainer(t, c, supervise.GatewayStopBudget)
	require.NotContains(t, log.String(), badKey)
}

// Bad input fails at start with one clear record naming what is missing:
// a runtime location that does not exist, and a secret mount others can read.
func TestGatewayImageBadInput(t *testing.T) {
	r := render(t, embeddedRev("rev-input"), map[string][]byte{contract.SecretModelAPIKey: []byte(goodKey)}, kubernetes.RoleGateway)
	for _, tc := range []struct {
		name   string
		env    []string
		mutate func(*rendered)
		want   []string
	}{
		{name: "missing runtime", env: []string{"OCE_OPENCLAW_MJS=/opt/oce/openclaw/missing.mjs"},
			want: []string{"openclaw runtime not installed", "OCE_OPENCLAW_MJS"}},
		{name: "world-readable secret mount", mutate: func(r *rendered) {
			for _, v := range r.spec.Volumes {
				if v.Projected != nil {
					m := int32(0o444)
					v.Projected.DefaultMode = &m
				}
			}
		}, want: []string{"INSECURE_SECRET_FILE", "gateway-password"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := r
			rr.spec = *r.spec.DeepCopy()
			if tc.mutate != nil {
				tc.mutate(&rr)
			}
			log := &logtest.Buffer{}
			p := podOf(t, rr, rr.claims(t), log, tc.env...)
			c := startContainer(t, p, rr.container)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			code, err := c.Wait(ctx)
			require.NoError(t, err)
			require.Equal(t, gatewayd.ExitBadInput, code)
			var errs []map[string]any
			for _, rec := range log.JSONRecords() {
				if rec["level"] == "ERROR" {
					errs = append(errs, rec)
				}
			}
			require.Len(t, errs, 1, "one record: %s", log.String())
			require.Equal(t, "NOT_CONFIGURED", errs[0]["code"])
			for _, w := range tc.want {
				require.Contains(t, mustJSON(errs[0]), w)
			}
		})
	}
}

// requireCompileCacheHits: gatewayd linked the image's prebuilt compile
// cache, and the gateway's boot took most of its modules' code from it.
func requireCompileCacheHits(t *testing.T, log *logtest.Buffer) {
	t.Helper()
	state, accepted, missed := "", 0, 0
	for _, rec := range records(log, "gatewayd") {
		if rec["msg"] == "compile cache" {
			state, _ = rec["prebuilt"].(string)
		}
		line, _ := rec["line"].(string)
		switch {
		case !strings.HasPrefix(line, "[compile cache]"):
		case strings.Contains(line, "was accepted"):
			accepted++
		case strings.Contains(line, "was not initialized") || strings.Contains(line, "mismatch") ||
			strings.Contains(line, "was rejected"):
			missed++
		}
	}
	t.Logf("compile cache: %s, %d modules from the cache, %d compiled", state, accepted, missed)
	require.Equal(t, string(runtimes.CompileCachePrebuilt), state)
	require.Greater(t, accepted, 1000)
	require.Greater(t, accepted, 10*missed, "most modules come from the image's cache")
}
