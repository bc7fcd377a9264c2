package gatewayd

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/probe/fakeprovider"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/netns"
	"oce.dev/oce/shared/ocproto"
	"oce.dev/oce/shared/proc"
	"oce.dev/oce/shared/runtimes"
)

// realReady bounds a real gateway start through gatewayd (probe included).
const realReady = 240 * time.Second

const goodKey = "sk-fake-good-key-0123456789"

func realEnv(t *testing.T, topology contract.Topology) (string, map[string]string) {
	require.NoError(t, netns.Isolated(), "the real gateway runs only in the loopback-only namespace")
	paths, err := runtimes.Ensure(context.Background())
	require.NoError(t, err)
	dir := t.TempDir()
	env := gwEnv(t, dir, topology, freePort(t), freePort(t))
	env["OCE_OPENCLAW_BIN"] = strings.Join(paths.OpenClawCommand(), " ")
	writeJSONFile(t, env["OPENCLAW_CONFIG_PATH"], map[string]any{})
	return dir, env
}

// childPids lists the direct children of pid.
func childPids(pid int) []int { return proc.Children(pid) }

// gatewaydPid is the gatewayd process under tini; gatewayChild the gateway
// process group leader under gatewayd.
func (p *gwProc) gatewaydPid() int {
	c := childPids(p.cmd.Process.Pid)
	require.Len(p.t, c, 1)
	return c[0]
}

func (p *gwProc) gatewayChild() int {
	c := childPids(p.gatewaydPid())
	require.Len(p.t, c, 1)
	return c[0]
}

// ownRecords are gatewayd's own records (not the child's output lines).
func (p *gwProc) ownRecords() []map[string]any {
	var out []map[string]any
	for _, r := range p.log.records() {
		if r["msg"] != "child output" {
			out = append(out, r)
		}
	}
	return out
}

func TestRealEmbeddedProbeRespawnStop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fp, err := fakeprovider.Start(ctx, fakeprovider.Options{ValidKeys: []string{goodKey}, Reply: "OK"})
	require.NoError(t, err)
	defer fp.Close()
	dir, env := realEnv(t, contract.Embedded)
	writeJSONFile(t, env["OPENCLAW_CONFIG_PATH"], map[string]any{
		"agents": map[string]any{"defaults": map[string]any{"model": map[string]any{"primary": "openai/gpt-fake-1"}}}})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "secrets", "model-api-key"), []byte(goodKey), 0o600))
	env["OCE_MODEL_PROVIDER_BASE_URL_OPENAI"] = fp.URL()
	p := startGW(t, dir, env)

	p.waitReady(realReady)
	mp := p.log.phase(PhaseModelProbe)
	require.Len(t, mp, 1)
	require.Equal(t, "ok", mp[0]["outcome"])
	var probeCode any
	for _, r := range p.log.records() {
		if r["msg"] == "openclaw.model_probe" {
			probeCode = r["code"]
		}
	}
	require.Equal(t, "READY", probeCode)
	require.Equal(t, int64(1), fp.UpfrontRequests())
	require.GreaterOrEqual(t, fp.Requests(), int64(1), "the OpenClaw probe called the model")
	code, out := readyProbe(t, p.statusAddr)
	require.Equal(t, 0, code, out)
	require.Len(t, p.log.phase(PhaseNativeSpawn), 1)

	// the coordinator route refuses a caller without the status token
	resp, err := http.Post("http://"+p.statusAddr+contract.RouteSetupCode, "application/json", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// SIGKILL of the gateway's group: respawned and ready again
	old := p.gatewayChild()
	require.NoError(t, syscall.Kill(-old, syscall.SIGKILL))
	require.Eventually(t, func() bool { return len(p.log.phase(PhaseGatewayRespawn)) == 1 }, realReady, 250*time.Millisecond)
	require.Equal(t, "ok", p.log.phase(PhaseGatewayRespawn)[0]["outcome"])
	p.waitReady(10 * time.Second)
	require.NotEqual(t, old, p.gatewayChild())

	// no provider, model, credential or path in gatewayd's own records
	for _, r := range p.ownRecords() {
		b, _ := json.Marshal(r)
		for _, bad := range []string{goodKey, "gw-test-password-1", "gpt-fake-1", dir} {
			require.NotContains(t, string(b), bad)
		}
	}

	// the coordinator's relay: one turn through the gateway as the loopback
	// operator, streamed back as NDJSON (a remote operator would need
	// pairing approval); without the status token, nothing
	chat := func(token string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+p.statusAddr+contract.RouteChat,
			strings.NewReader(`{"session":"main","message":"hello through gatewayd"}`))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		return http.DefaultClient.Do(req)
	}
	resp, err = chat("")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	before := fp.Requests()
	resp, err = chat("status-token-xyz")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/x-ndjson", resp.Header.Get("Content-Type"))
	var events []contract.ChatEvent
	dec := json.NewDecoder(resp.Body)
	for {
		var ev contract.ChatEvent
		if dec.Decode(&ev) != nil {
			break
		}
		events = append(events, ev)
	}
	resp.Body.Close()
	require.NotEmpty(t, events)
	last := events[len(events)-1]
	require.True(t, last.Done, "%+v", events)
	require.Contains(t, last.Reply, "OK", "the fake provider's reply")
	require.Greater(t, fp.Requests(), before, "the turn reached the model")

	// SIGTERM: forwarded, the idle gateway stops promptly, exit 0 under tini
	start := time.Now()
	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.waitExit(60*time.Second))
	t.Logf("stop took %s", time.Since(start))
}

func TestRealNodeEnrollmentThroughGatewayd(t *testing.T) {
	dir, env := realEnv(t, contract.DedicatedOpenClaw)
	nodeState, ws := filepath.Join(dir, "node-state"), filepath.Join(dir, "harness-ws")
	require.NoError(t, os.MkdirAll(nodeState, 0o700))
	require.NoError(t, os.MkdirAll(ws, 0o700))
	id, err := ocproto.NewIdentity()
	require.NoError(t, err)
	require.NoError(t, id.Save(filepath.Join(nodeState, "identity.json")))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "AGENTS.md"), []byte("# agents\n"), 0o600))
	env["OCE_WORKSPACE_NODE_ID"] = id.DeviceID
	env["OCE_NODE_WORKSPACE_DIR"] = ws
	env["OCE_GATEWAY_PUBLIC_URL"] = fmt.Sprintf("ws://127.0.0.1:%s", env["OPENCLAW_GATEWAY_PORT"])
	p := startGW(t, dir, env)
	p.waitReady(realReady)

	bearer := func(method, route string) (*http.Response, error) {
		req, _ := http.NewRequest(method, "http://"+p.statusAddr+route, nil)
		req.Header.Set("Authorization", "Bearer status-token-xyz")
		return http.DefaultClient.Do(req)
	}
	resp, err := bearer(http.MethodPost, contract.RouteSetupCode)
	require.NoError(t, err)
	var sc contract.SetupCodeResponse
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&sc))
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotEmpty(t, sc.SetupCode)
	require.Greater(t, sc.ExpiresAtMs, time.Now().UnixMilli())
	decoded, err := ocproto.DecodeSetupCode(sc.SetupCode)
	require.NoError(t, err)
	require.Equal(t, env["OCE_GATEWAY_PUBLIC_URL"], decoded.URL)

	enroll := filepath.Join(dir, "enrollment")
	require.NoError(t, os.WriteFile(enroll, []byte(sc.SetupCode), 0o600))
	nh := exec.Command(nodehostBin, "run", "--state-dir", nodeState, "--workspace", ws, "--enrollment-file", enroll,
		"--display-name", "it-node", "--file-only")
	nh.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	var nhLog bytes.Buffer
	nh.Stdout, nh.Stderr = &nhLog, &nhLog
	nh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, nh.Start())
	nhDone := make(chan struct{})
	go func() { _ = nh.Wait(); close(nhDone) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-nh.Process.Pid, syscall.SIGTERM)
		select {
		case <-nhDone:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-nh.Process.Pid, syscall.SIGKILL)
		}
		if t.Failed() {
			t.Logf("nodehost log:\n%s", nhLog.String())
		}
	})

	// the coordinator sees the enrolled node on gatewayd's route
	require.Eventually(t, func() bool {
		resp, err := bearer(http.MethodGet, contract.RouteNodes)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var nr contract.NodesResponse
		if json.NewDecoder(resp.Body).Decode(&nr) != nil {
			return false
		}
		for _, n := range nr.Nodes {
			if n.NodeID == id.DeviceID && n.Connected {
				return true
			}
		}
		return false
	}, 90*time.Second, 500*time.Millisecond, "node never listed as connected")

	// invoked through the gateway: gatewayd's allow-list and file-transfer
	// policy admit the workspace file commands for the pinned node
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	op, err := ocproto.DialOperator(ctx, ocproto.OperatorConfig{URL: "ws://127.0.0.1:" + env["OPENCLAW_GATEWAY_PORT"],
		Password: "gw-test-password-1"})
	require.NoError(t, err)
	defer op.Close()
	var res ocproto.InvokeResult
	require.Eventually(t, func() bool {
		res, err = op.NodeInvoke(ctx, id.DeviceID, "file.fetch", map[string]any{"path": filepath.Join(ws, "AGENTS.md")}, 20000)
		return err == nil
	}, 60*time.Second, time.Second, "file.fetch never admitted: %v", err)
	var fetched map[string]any
	require.NoError(t, json.Unmarshal([]byte(res.PayloadJSON), &fetched))
	data, _ := base64.StdEncoding.DecodeString(fmt.Sprint(fetched["base64"]))
	require.Equal(t, "# agents\n", string(data))
	// a path outside the node's workspace is refused by the gateway policy
	_, err = op.NodeInvoke(ctx, id.DeviceID, "file.fetch", map[string]any{"path": filepath.Join(dir, "status-token")}, 20000)
	require.Error(t, err)

	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.waitExit(60*time.Second))
}
