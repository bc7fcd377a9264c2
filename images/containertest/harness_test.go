package containertest

import (
	"context"
	"errors"
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
	"oce.dev/oce/probe/fakeprovider"
	"oce.dev/oce/shared/appserver"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/logtest"
	"oce.dev/oce/shared/supervise"
)

// harnessReady bounds login, the Codex model probe and the app-server start.
const harnessReady = 120 * time.Second

func dedicatedRev(id string) state.Revision {
	return state.Revision{ID: id, AgentID: "agent-img", NamespaceID: "ns-img", Mode: state.ModeDedicated,
		Harness: state.HarnessIdentity{ID: state.HarnessCodex, Version: "0.169.0"},
		Document: []byte(`{"agents":{"defaults":{"model":"openai/gpt-fake-1","models":{"openai/gpt-fake-1":{"agentRuntime":{"id":"codex"}}}}},` +
			`"plugins":{"entries":{"codex":{"enabled":true,"config":{"appServer":{"transport":"websocket"}}}}}}`),
		HarnessAuth: &state.HarnessAuth{Method: "api_key", CredentialKind: "secret", SourceRef: "secret:model#key"}}
}

// The harness image runs the dedicated Harness Pod the driver renders: tini
// PID 1, uid 1000, read-only root, kubelet's secret layout; the real Codex
// app-server ready by the driver's exec probe, a turn over its WebSocket with
// the capability token (refused without it); SIGTERM ends the container
// with 0 within the Codex stop budget. A second container of the same Pod
// (kubelet's restart) shows the respawn policy: when the app-server is
// SIGKILLed harnessd exits 1 with one record saying so, for kubelet to
// restart the container.
func TestHarnessImageDedicated(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fp := startProvider(t)

	r := render(t, dedicatedRev("rev-codex"), map[string][]byte{contract.SecretOpenAIAPIKey: []byte(goodKey)}, kubernetes.RoleAgent)
	log := &logtest.Buffer{}
	p := podOf(t, r, r.claims(t), log, providerEnv(fp))
	start := time.Now()
	c := startContainer(t, p, r.container)
	waitProbe(t, p, c, harnessReady)
	t.Logf("harness container ready in %s", time.Since(start).Round(time.Millisecond))
	requireKubeletShape(t, p, c, "harnessd")

	url := fmt.Sprintf("ws://127.0.0.1:%d", contract.AppServerPort)
	token := r.secret(t, contract.SecretAppServerToken)
	_, err := appserver.Dial(ctx, url, "")
	require.ErrorIs(t, err, appserver.ErrUnauthorized, "no capability token, no session")
	tctx, tcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer tcancel()
	cl, err := appserver.Dial(tctx, url, token)
	require.NoError(t, err)
	th, err := cl.StartThread(tctx, appserver.ThreadOptions{Cwd: "/home/node/workspace", ApprovalPolicy: appserver.ApprovalNever,
		Sandbox: appserver.SandboxReadOnly, Ephemeral: true})
	require.NoError(t, err)
	res, err := cl.RunTurn(tctx, th.ID, "Say hello from the image", func(string) {})
	require.NoError(t, err)
	require.Equal(t, appserver.StatusCompleted, res.Status, "%+v", res.Error)
	require.Contains(t, res.Text, reply)
	cl.Close()

	// harnessd's budget: the app-server's (nodehost's is 1 s longer)
	took := stopContainer(t, c, supervise.CodexStopBudget+time.Second)
	t.Logf("harness container stopped in %s", took.Round(time.Millisecond))
	c.Delete()

	// the Pod's container again, as kubelet restarts it on the same volumes
	log2 := &logtest.Buffer{}
	p2 := podOf(t, r, p2Claims(p, r), log2, providerEnv(fp))
	c2 := startContainer(t, p2, r.container)
	waitProbe(t, p2, c2, harnessReady)
	pid1, err := c2.Pid()
	require.NoError(t, err)
	sup := children(pid1)
	require.Len(t, sup, 1)
	var app int
	for _, k := range children(sup[0]) {
		if strings.Contains(strings.Join(cmdline(k), " "), "app-server") {
			app = k
		}
	}
	require.NotZero(t, app, "harnessd runs codex app-server")
	require.NoError(t, syscall.Kill(app, syscall.SIGKILL))
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	code, err := c2.Wait(wctx)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("harnessd did not exit after its app-server died: %s", log2.String())
	}
	require.NoError(t, err)
	require.Equal(t, 1, code, "harnessd exits for kubelet to restart the container")
	var exited int
	for _, rec := range records(log2, "") {
		if rec["msg"] == "codex app-server exited" {
			exited++
		}
	}
	require.Equal(t, 1, exited, "one record says why: %s", log2.String())

	for _, l := range []string{log.String(), log2.String()} {
		require.NotContains(t, l, goodKey)
		require.NotContains(t, l, token)
	}
}

// providerEnv is the offline endpoint override a Harness gets: the /v1 base
// Codex POSTs {base}/responses to (as the local driver passes it).
func providerEnv(fp *fakeprovider.Server) string {
	return "OCE_MODEL_PROVIDER_BASE_URL_OPENAI=" + fp.URL() + "/v1"
}

// p2Claims reuses the claims of the first Pod (the volumes outlive it).
func p2Claims(p interface{ VolumeDir(string) string }, r rendered) map[string]string {
	out := map[string]string{}
	for _, v := range r.spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			out[v.PersistentVolumeClaim.ClaimName] = p.VolumeDir(v.Name)
		}
	}
	return out
}

// The dedicated Codex topology in the two images: the Harness container,
// then the Gateway container the driver creates once the Harness runs. The
// gateway image installs the @openclaw/codex plugin offline from the npm
// cache it carries (read-only root: gatewayd copies it into the state
// volume for the installer), becomes ready by the driver's probe, and a
// message through the real gateway's codex plugin reaches the Harness's
// Codex and comes back with the fake provider's reply.
//
// Both containers share the test's one loopback-only network namespace, so
// what a cluster's Services and separate Pod addresses provide is given as
// overrides: the Gateway reaches the Harness on 127.0.0.1 (not
// agent-<a12>.<ns>.svc), and its status server moves to 18792 (both Pods
// use 18791 in a cluster).
func TestDedicatedCodexImages(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fp := startProvider(t)
	hr, gr := renderDedicated(t, dedicatedRev("rev-pair"), map[string][]byte{contract.SecretOpenAIAPIKey: []byte(goodKey)})

	hlog := &logtest.Buffer{}
	hp := podOf(t, hr, hr.claims(t), hlog, providerEnv(fp))
	hc := startContainer(t, hp, hr.container)
	waitProbe(t, hp, hc, harnessReady)

	glog := &logtest.Buffer{}
	gp := podOf(t, gr, gr.claims(t), glog,
		fmt.Sprintf("OCE_STATUS_ADDR=:%d", contract.StatusPort+1),
		fmt.Sprintf("OCE_PEER_STATUS_URL=http://127.0.0.1:%d/openclaw/plugin-runtime/remote-status", contract.StatusPort),
		fmt.Sprintf("OCE_APP_SERVER_URL=ws://127.0.0.1:%d", contract.AppServerPort))
	start := time.Now()
	gc := startContainer(t, gp, gr.container)
	waitProbe(t, gp, gc, gatewayReady)
	t.Logf("dedicated gateway container ready in %s (plugin install included)", time.Since(start).Round(time.Millisecond))
	requireKubeletShape(t, gp, gc, "gatewayd")

	var install map[string]any
	for _, rec := range records(glog, "gatewayd") {
		if rec["msg"] == "runtime.startup_phase" && rec["phase"] == gatewayd.PhasePluginInstall {
			install = rec
		}
	}
	require.NotNil(t, install, "the plugin-install phase ran")
	require.Equal(t, "ok", install["outcome"])
	out, code, err := gc.Exec(ctx, "", "/bin/sh", "-c",
		"ls -d /home/node/.openclaw/npm/projects/*/node_modules/@openclaw/codex && ! test -e /home/node/.openclaw/.oce-npm-cache")
	require.NoError(t, err)
	require.Equal(t, 0, code, "a managed install in the state volume, the cache copy removed: %s", out)

	cctx, ccancel := context.WithTimeout(ctx, 3*time.Minute)
	defer ccancel()
	before := fp.Requests()
	text, err := occ.Chat(cctx, fmt.Sprintf("ws://127.0.0.1:%d", contract.GatewayPort), gr.secret(t, contract.SecretGatewayPassword),
		"main", "hello codex in a container", io.Discard, nil)
	require.NoError(t, err, "gateway log: %s", glog.String())
	require.Contains(t, text, reply, "the reply came through the gateway's codex plugin and the Harness's Codex")
	require.Greater(t, fp.Requests(), before)

	stopContainer(t, gc, supervise.GatewayStopBudget) // the Gateway first, then the Harness
	stopContainer(t, hc, supervise.CodexStopBudget+time.Second)
	for _, l := range []string{hlog.String(), glog.String()} {
		require.NotContains(t, l, goodKey)
	}
}

// A missing runtime in the harness image is held at start with one record
// naming the variable that points at it; the probe says which check failed.
func TestHarnessImageMissingRuntime(t *testing.T) {
	fp := startProvider(t)
	r := render(t, dedicatedRev("rev-nocodex"), map[string][]byte{contract.SecretOpenAIAPIKey: []byte(goodKey)}, kubernetes.RoleAgent)
	log := &logtest.Buffer{}
	p := podOf(t, r, r.claims(t), log, providerEnv(fp), "OCE_CODEX_BIN=/usr/local/bin/no-codex")
	c := startContainer(t, p, r.container)
	spec, _ := p.Spec(r.container)
	poll.Until(t, func() bool {
		out, code, err := c.Probe(context.Background(), spec.ReadinessProbe)
		require.NoError(t, err)
		require.NotEqual(t, 0, code)
		return strings.Contains(out, "workspace-setup failed with UNAVAILABLE")
	}, harnessReady, time.Second)
	var named []map[string]any
	for _, rec := range records(log, "harnessd") {
		if rec["missing"] != nil {
			named = append(named, rec)
		}
	}
	require.Len(t, named, 1, log.String())
	require.Equal(t, "OCE_CODEX_BIN", named[0]["missing"])
	require.Equal(t, "UNAVAILABLE", named[0]["code"])
	stopContainer(t, c, supervise.CodexStopBudget+time.Second)
}
