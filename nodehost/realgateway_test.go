package nodehost

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"oce.dev/oce/shared/logtest"
	"oce.dev/oce/shared/ocproto"
	"oce.dev/oce/shared/octest"
)

// One real gateway per test binary; the node's identity exists before the
// gateway starts so its file-transfer policy can name it.
var (
	gwOnce  sync.Once
	gw      *octest.Gateway
	gwErr   error
	gwNode  string // state dir holding the identity the gateway trusts
	gwWS    string
	gwDevID string
)

func realGateway(t testing.TB) *octest.Gateway {
	t.Helper()
	gwOnce.Do(func() {
		dir, err := os.MkdirTemp("", "nodehost-it-*")
		if err != nil {
			gwErr = err
			return
		}
		gwNode, gwWS = filepath.Join(dir, "node-state"), filepath.Join(dir, "workspace")
		h, err := New(Config{StateDir: gwNode, Workspace: gwWS})
		if err != nil {
			gwErr = err
			return
		}
		gwDevID = h.DeviceID()
		gw, gwErr = octest.Start(context.Background(), octest.Options{Config: map[string]any{
			"gateway": map[string]any{"nodes": map[string]any{
				"pairing":  map[string]any{"autoApproveLocal": false},
				"commands": map[string]any{"allow": []string{"file.stat", "file.fetch", "dir.list", "file.write", "workspace.memory", "system.run", "system.which"}},
			}},
			"plugins": map[string]any{"entries": map[string]any{"file-transfer": map[string]any{"config": map[string]any{
				"policyVersion": 2,
				"nodes": map[string]any{gwDevID: map[string]any{"ask": "off",
					"allowReadPaths": []string{gwWS + "/**"}, "allowWritePaths": []string{gwWS + "/**"}}},
			}}}},
		}})
	})
	require.NoError(t, gwErr)
	return gw
}

func operator(t *testing.T, ctx context.Context, g *octest.Gateway) *ocproto.Operator {
	op, err := ocproto.DialOperator(ctx, ocproto.OperatorConfig{URL: g.URL, Password: g.Password})
	require.NoError(t, err)
	t.Cleanup(func() { op.Close() })
	return op
}

func waitConnected(t *testing.T, ctx context.Context, op *ocproto.Operator, deviceID string) ocproto.NodeInfo {
	var found ocproto.NodeInfo
	require.Eventually(t, func() bool {
		nodes, err := op.NodeList(ctx)
		if err != nil {
			return false
		}
		for _, n := range nodes {
			if n.NodeID == deviceID && n.Connected {
				found = n
				return true
			}
		}
		return false
	}, 60*time.Second, 250*time.Millisecond, "node %s never connected", deviceID)
	return found
}

// waitHost waits until the gateway lists h connected and h itself has
// persisted its credentials (it reports Connected only after that).
func waitHost(t *testing.T, ctx context.Context, op *ocproto.Operator, h *Host) ocproto.NodeInfo {
	n := waitConnected(t, ctx, op, h.DeviceID())
	require.Eventually(t, h.Connected, 30*time.Second, 50*time.Millisecond)
	return n
}

func runHost(t *testing.T, cfg Config) (*Host, context.CancelFunc, chan error) {
	h, err := New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	return h, cancel, done
}

func stopHost(t *testing.T, cancel context.CancelFunc, done chan error) {
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("host did not stop")
	}
}

func writeEnrollment(t *testing.T, ctx context.Context, op *ocproto.Operator, g *octest.Gateway, path string) {
	sc, err := op.SetupCode(ctx, g.URL)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(sc.SetupCode), 0o600))
}

func invoke(t *testing.T, ctx context.Context, op *ocproto.Operator, node, cmd string, params any) map[string]any {
	t.Helper()
	res, err := op.NodeInvoke(ctx, node, cmd, params, 20000)
	require.NoError(t, err, cmd)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(res.PayloadJSON), &m), res.PayloadJSON)
	return m
}

func TestRealGatewayEnrollServeReconnect(t *testing.T) {
	g := realGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	op := operator(t, ctx, g)
	enroll := filepath.Join(filepath.Dir(gwNode), "enrollment")
	writeEnrollment(t, ctx, op, g, enroll)
	require.NoError(t, os.WriteFile(filepath.Join(gwWS, "AGENTS.md"), []byte("# hello from the harness\n"), 0o600))

	cfg := Config{StateDir: gwNode, Workspace: gwWS, EnrollmentFile: enroll, DisplayName: "it-node"}
	h, stop, done := runHost(t, cfg)
	waitHost(t, ctx, op, h)

	// the one-use enrollment file is consumed; the device token is private
	_, err := os.Stat(enroll)
	require.True(t, os.IsNotExist(err), "enrollment file still present")
	st, err := os.Stat(filepath.Join(gwNode, tokenFile))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	which := invoke(t, ctx, op, h.DeviceID(), "system.which", map[string]any{"bins": []string{"sh"}})
	require.Contains(t, which["bins"], "sh")
	run := invoke(t, ctx, op, h.DeviceID(), "system.run", map[string]any{"command": []string{"sh", "-c", "echo ran-on-node; pwd"}})
	require.Equal(t, true, run["success"])
	require.Contains(t, run["stdout"], "ran-on-node")
	require.Contains(t, run["stdout"], gwWS)

	agents := filepath.Join(gwWS, "AGENTS.md")
	stat := invoke(t, ctx, op, h.DeviceID(), "file.stat", map[string]any{"path": agents})
	require.Equal(t, "file", stat["type"])
	fetched := invoke(t, ctx, op, h.DeviceID(), "file.fetch", map[string]any{"path": agents})
	data, _ := base64.StdEncoding.DecodeString(fetched["base64"].(string))
	require.Equal(t, "# hello from the harness\n", string(data))
	invoke(t, ctx, op, h.DeviceID(), "file.write", map[string]any{"path": filepath.Join(gwWS, "memory", "note.md"),
		"contentBase64": base64.StdEncoding.EncodeToString([]byte("remember"))})
	b, err := os.ReadFile(filepath.Join(gwWS, "memory", "note.md"))
	require.NoError(t, err)
	require.Equal(t, "remember", string(b))
	// the node-side policy backs up the gateway's: code files are not writable
	_, err = op.NodeInvoke(ctx, h.DeviceID(), "file.write", map[string]any{"path": filepath.Join(gwWS, "main.go"),
		"contentBase64": base64.StdEncoding.EncodeToString([]byte("x"))}, 20000)
	require.Error(t, err)
	stopHost(t, stop, done)

	// restart with the device token alone (no enrollment file any more);
	// pairing checks every 100 ms (production: PairingCheckInterval) are
	// answered and keep the one session
	var h2Log logtest.Buffer
	h2, stop2, done2 := runHost(t, Config{StateDir: gwNode, Workspace: gwWS, DisplayName: "it-node", PairingCheck: 100 * time.Millisecond,
		Log: slog.New(slog.NewJSONHandler(&h2Log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.Equal(t, h.DeviceID(), h2.DeviceID())
	waitHost(t, ctx, op, h2)
	which = invoke(t, ctx, op, h2.DeviceID(), "system.which", map[string]any{"bins": []string{"sh"}})
	require.Contains(t, which["bins"], "sh")
	require.Eventually(t, func() bool { _, checks := h2.pairingCounts(); return checks >= 10 }, 30*time.Second, 50*time.Millisecond)
	hellos, _ := h2.pairingCounts()
	require.Equal(t, 1, hellos, "a current session was dropped:\n%s", h2Log.String())
	stopHost(t, stop2, done2)

	// worker slots reach the gateway through node.runnerInventory.update
	h3, stop3, done3 := runHost(t, Config{StateDir: gwNode, Workspace: gwWS, DisplayName: "it-node",
		WorkerCommand: []string{"sleep", "3600"}, WorkerCapacity: 2})
	defer stopHost(t, stop3, done3)
	slots := func() (total, avail float64) {
		raw, err := op.RequestRaw(ctx, "node.list", map[string]any{})
		if err != nil {
			return -1, -1
		}
		var l struct {
			Nodes []struct {
				NodeID      string             `json:"nodeId"`
				Connected   bool               `json:"connected"`
				WorkerSlots map[string]float64 `json:"workerSlots"`
			} `json:"nodes"`
		}
		_ = json.Unmarshal(raw, &l)
		for _, n := range l.Nodes {
			if n.NodeID == h3.DeviceID() && n.Connected && n.WorkerSlots != nil {
				return n.WorkerSlots["total"], n.WorkerSlots["available"]
			}
		}
		return -1, -1
	}
	require.Eventually(t, func() bool { tot, av := slots(); return tot == 2 && av == 2 }, 60*time.Second, 250*time.Millisecond)
	_, err = h3.workerLaunch([]byte(`{"launchId":"l1","sessionKey":"session-a"}`))
	require.NoError(t, err)
	require.Eventually(t, func() bool { tot, av := slots(); return tot == 2 && av == 1 }, 30*time.Second, 250*time.Millisecond,
		"the gateway never saw the admitted session take a slot")
}

// A node enrolled with the file-only companion surface that later declares
// system commands needs explicit approval (autoApproveLocal is off).
func TestRealGatewayExplicitApprovalOfExpandedSurface(t *testing.T) {
	g := realGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	op := operator(t, ctx, g)
	dir := t.TempDir()
	state, ws, enroll := filepath.Join(dir, "state"), filepath.Join(dir, "ws"), filepath.Join(dir, "enroll")
	writeEnrollment(t, ctx, op, g, enroll)
	h, stop, done := runHost(t, Config{StateDir: state, Workspace: ws, EnrollmentFile: enroll, FileOnly: true})
	n := waitHost(t, ctx, op, h)
	require.NotContains(t, n.Commands, "system.run")
	stopHost(t, stop, done)

	var hostLog logtest.Buffer
	h2, stop2, done2 := runHost(t, Config{StateDir: state, Workspace: ws, Log: slog.New(slog.NewJSONHandler(&hostLog, nil))})
	defer stopHost(t, stop2, done2)
	waitHost(t, ctx, op, h2)
	var pending ocproto.PendingNode
	require.Eventually(t, func() bool {
		l, err := op.NodePairList(ctx)
		if err != nil {
			return false
		}
		for _, p := range l.Pending {
			if p.NodeID == h2.DeviceID() {
				pending = p
				return true
			}
		}
		return false
	}, 60*time.Second, 250*time.Millisecond, "no pending surface request for the expanded commands")
	require.Contains(t, pending.Commands, "system.run")
	// not yet approved: system commands are not invocable
	_, err := op.NodeInvoke(ctx, h2.DeviceID(), "system.which", map[string]any{"bins": []string{"sh"}}, 10000)
	require.Error(t, err)
	require.NoError(t, op.NodePairApprove(ctx, pending.RequestID))
	var last error
	invocable := func() bool {
		res, err := op.NodeInvoke(ctx, h2.DeviceID(), "system.which", map[string]any{"bins": []string{"sh"}}, 10000)
		if last = err; err == nil && !res.OK {
			last = fmt.Errorf("answered %+v", res)
		}
		return last == nil
	}
	if !assert.Eventually(t, invocable, 60*time.Second, 500*time.Millisecond) {
		gwLog, _ := os.ReadFile(g.LogPath)
		gwLog = gwLog[max(0, len(gwLog)-32<<10):]
		t.Fatalf("the approved command never became invocable; last: %v\nnode host log:\n%s\ngateway log (tail):\n%s", last, hostLog.String(), gwLog)
	}
	// whether the approval reached the live session or the node reconnected
	t.Logf("node host log:\n%s", hostLog.String())
}

func TestRealGatewayRejectsForeignDeviceToken(t *testing.T) {
	g := realGateway(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	h, err := New(Config{StateDir: state, Workspace: filepath.Join(dir, "ws"), GatewayURL: g.URL})
	require.NoError(t, err)
	require.NoError(t, h.state.saveToken("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"))
	require.NoError(t, h.state.saveGatewayURL(g.URL))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = h.Run(ctx)
	require.ErrorIs(t, err, ErrFatal)
	if errors.Is(err, ErrFatal) && ocproto.DetailsCode(errors.Unwrap(err)) == "AUTH_DEVICE_TOKEN_MISMATCH" {
		_, statErr := os.Stat(filepath.Join(state, tokenFile))
		require.True(t, os.IsNotExist(statErr), "mismatched token was kept")
	}
}
