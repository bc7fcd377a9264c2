package ocproto

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"oce.dev/oce/shared/octest"
)

var (
	gwOnce sync.Once
	gw     *octest.Gateway
	gwErr  error
)

// realGateway starts one real OpenClaw gateway for the whole test binary.
func realGateway(t *testing.T) *octest.Gateway {
	t.Helper()
	gwOnce.Do(func() {
		gw, gwErr = octest.Start(context.Background(), octest.Options{})
	})
	require.NoError(t, gwErr)
	return gw
}

// nodeServing connects a minimal node that answers system.which.
func nodeServing(t *testing.T, ctx context.Context, g *octest.Gateway, id *Identity, creds Credentials) (*Conn, error) {
	var c *Conn
	var mu sync.Mutex
	onEvent := func(ev Event) {
		if ev.Event != "node.invoke.request" {
			return
		}
		var req struct {
			ID         string `json:"id"`
			NodeID     string `json:"nodeId"`
			Command    string `json:"command"`
			ParamsJSON string `json:"paramsJSON"`
		}
		if json.Unmarshal(ev.Payload, &req) != nil {
			return
		}
		go func() {
			mu.Lock()
			conn := c
			mu.Unlock()
			res := map[string]any{"id": req.ID, "nodeId": req.NodeID, "ok": true,
				"payloadJSON": `{"bins":{"sh":"/bin/sh"}}`}
			_ = conn.Request(context.Background(), "node.invoke.result", res, nil)
		}()
	}
	conn, err := Dial(ctx, Config{URL: g.URL, Role: RoleNode, Client: NodeHostClient("ocproto-test", ClientVersion, ""),
		Caps: []string{"system"}, Commands: []string{"system.which"}, Identity: id, Credentials: creds, OnEvent: onEvent})
	mu.Lock()
	c = conn
	mu.Unlock()
	return conn, err
}

func TestRealGatewayEnrollInvokeReconnect(t *testing.T) {
	g := realGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	op, err := DialOperator(ctx, OperatorConfig{URL: g.URL, Password: g.Password})
	require.NoError(t, err)
	defer op.Close()
	require.Equal(t, "hello-ok", op.Hello().Type)
	require.Equal(t, ProtocolVersion, op.Hello().Protocol)

	sc, err := op.SetupCode(ctx, g.URL)
	require.NoError(t, err)
	code, err := DecodeSetupCode(sc.SetupCode)
	require.NoError(t, err)
	require.NotEmpty(t, code.BootstrapToken)
	require.Greater(t, code.ExpiresAtMs, time.Now().UnixMilli())

	id, err := NewIdentity()
	require.NoError(t, err)
	node, err := nodeServing(t, ctx, g, id, Credentials{BootstrapToken: code.BootstrapToken})
	require.NoError(t, err)
	hello := node.Hello()
	require.Equal(t, "bootstrap-token", hello.Auth.Method)
	require.Len(t, hello.Auth.DeviceToken, 43)
	deviceToken := hello.Auth.DeviceToken

	require.Eventually(t, func() bool {
		nodes, err := op.NodeList(ctx)
		if err != nil {
			return false
		}
		for _, n := range nodes {
			if n.NodeID == id.DeviceID && n.Connected {
				return true
			}
		}
		return false
	}, 30*time.Second, 200*time.Millisecond, "the node never showed as connected")

	res, err := op.NodeInvoke(ctx, id.DeviceID, "system.which", map[string]any{"bins": []string{"sh"}}, 15000)
	require.NoError(t, err)
	require.True(t, res.OK)
	require.JSONEq(t, `{"bins":{"sh":"/bin/sh"}}`, res.PayloadJSON)
	node.Close()

	// The bootstrap token is one-use: a second enrollment with it fails.
	other, err := NewIdentity()
	require.NoError(t, err)
	_, err = Dial(ctx, Config{URL: g.URL, Role: RoleNode, Client: NodeHostClient("replay", ClientVersion, ""),
		Identity: other, Credentials: Credentials{BootstrapToken: code.BootstrapToken}})
	require.Error(t, err)

	// Reconnect with the stored device token alone.
	again, err := nodeServing(t, ctx, g, id, Credentials{StoredDeviceToken: deviceToken})
	require.NoError(t, err)
	defer again.Close()
	require.Equal(t, "device-token", again.Hello().Auth.Method)
}

func TestRealGatewayWrongPassword(t *testing.T) {
	g := realGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := DialOperator(ctx, OperatorConfig{URL: g.URL, Password: "not-the-password"})
	require.Error(t, err)
	var perr *Error
	require.ErrorAs(t, err, &perr)
	require.Equal(t, "AUTH_PASSWORD_MISMATCH", perr.DetailsCode)
	require.True(t, perr.Fatal())
}

func TestRealGatewayWrongDeviceToken(t *testing.T) {
	g := realGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := NewIdentity()
	require.NoError(t, err)
	_, err = Dial(ctx, Config{URL: g.URL, Role: RoleNode, Client: NodeHostClient("stranger", ClientVersion, ""),
		Identity: id, Credentials: Credentials{StoredDeviceToken: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}})
	require.Error(t, err)
	require.True(t, IsFatal(err) || DetailsCode(err) != "", "error: %v", err)
}
