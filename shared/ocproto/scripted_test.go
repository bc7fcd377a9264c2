package ocproto

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
)

// scriptedGateway is a minimal gateway: it sends a challenge, verifies the
// connect signature, and answers per the test's script.
type scriptedGateway struct {
	t        *testing.T
	srv      *httptest.Server
	connects chan ConnectParams
	// onConnect decides the connect response; nil → hello-ok.
	onConnect  func(p ConnectParams) *Response
	tickMs     int64
	sendTicks  bool
	afterHello func(ws *websocket.Conn)
}

func newScripted(t *testing.T, sg *scriptedGateway) *scriptedGateway {
	sg.t = t
	sg.connects = make(chan ConnectParams, 8)
	up := websocket.Upgrader{}
	sg.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		nonce := "nonce-" + r.RemoteAddr
		ts := time.Now().UnixMilli()
		_ = ws.WriteJSON(map[string]any{"type": "event", "event": "connect.challenge", "payload": map[string]any{"nonce": nonce, "ts": ts}})
		_, b, err := ws.ReadMessage()
		if err != nil {
			return
		}
		f, err := DecodeFrame(b)
		if err != nil || f.Req == nil || f.Req.Method != "connect" {
			return
		}
		var p ConnectParams
		if StrictUnmarshal(f.Req.Params, &p) != nil {
			return
		}
		sg.connects <- p
		res := &Response{Type: TypeRes, ID: f.Req.ID, OK: true}
		if p.Device != nil {
			_, sigTok := SelectAuth(Credentials{Token: authField(p.Auth, "token"), DeviceToken: authField(p.Auth, "deviceToken"), BootstrapToken: authField(p.Auth, "bootstrapToken"), Password: authField(p.Auth, "password")})
			payload := PayloadV3(SignatureParams{DeviceID: p.Device.ID, ClientID: p.Client.ID, ClientMode: p.Client.Mode, Role: p.Role,
				Scopes: p.Scopes, SignedAtMs: p.Device.SignedAt, Token: sigTok, Nonce: nonce, Platform: p.Client.Platform, DeviceFamily: p.Client.DeviceFamily})
			if !VerifySignature(p.Device.PublicKey, payload, p.Device.Signature) || p.Device.Nonce != nonce || p.Device.SignedAt != ts {
				res.OK = false
				res.Error = &ErrorShape{Code: "INVALID_REQUEST", Message: "bad signature", Details: json.RawMessage(`{"code":"DEVICE_AUTH_SIGNATURE_INVALID"}`)}
			}
		}
		if res.OK && sg.onConnect != nil {
			if r := sg.onConnect(p); r != nil {
				res = r
				res.ID = f.Req.ID
			}
		}
		if res.OK {
			tick := sg.tickMs
			if tick == 0 {
				tick = 30000
			}
			res.Payload = mustJSON(map[string]any{"type": "hello-ok", "protocol": p.MaxProtocol,
				"server": map[string]any{"version": "test", "connId": "c1"},
				"auth":   map[string]any{"method": "password", "role": p.Role, "scopes": p.Scopes, "deviceToken": "tok-123"},
				"policy": map[string]any{"maxPayload": 1 << 20, "maxBufferedBytes": 1 << 21, "tickIntervalMs": tick}})
		}
		_ = ws.WriteJSON(res)
		if !res.OK {
			return
		}
		if sg.afterHello != nil {
			sg.afterHello(ws)
			return
		}
		// echo server: answer every request with its params as payload
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			f, err := DecodeFrame(b)
			if err != nil || f.Req == nil {
				continue
			}
			if f.Req.Method == "fail" {
				_ = ws.WriteJSON(Response{Type: TypeRes, ID: f.Req.ID, OK: false, Error: &ErrorShape{Code: "UNAVAILABLE", Message: "nope"}})
				continue
			}
			_ = ws.WriteJSON(Response{Type: TypeRes, ID: f.Req.ID, OK: true, Payload: f.Req.Params})
		}
	}))
	t.Cleanup(sg.srv.Close)
	return sg
}

func authField(a *ConnectAuth, name string) string {
	if a == nil {
		return ""
	}
	switch name {
	case "token":
		return a.Token
	case "deviceToken":
		return a.DeviceToken
	case "bootstrapToken":
		return a.BootstrapToken
	}
	return a.Password
}

func (sg *scriptedGateway) url() string { return "ws" + strings.TrimPrefix(sg.srv.URL, "http") }

func nodeConfig(t *testing.T, url string) Config {
	id, err := NewIdentity()
	require.NoError(t, err)
	return Config{URL: url, Role: RoleNode, Client: NodeHostClient("n", ClientVersion, ""), Identity: id,
		Credentials: Credentials{Password: "pw"}}
}

func TestScriptedHandshakeSignsV3(t *testing.T) {
	sg := newScripted(t, &scriptedGateway{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, nodeConfig(t, sg.url()))
	require.NoError(t, err)
	defer c.Close()
	p := <-sg.connects
	require.Equal(t, 4, p.MinProtocol)
	require.Equal(t, 4, p.MaxProtocol)
	require.Equal(t, "node-host", p.Client.ID)
	require.Equal(t, "node", p.Client.Mode)
	require.Equal(t, "linux", p.Client.Platform)
	require.Equal(t, "Linux", p.Client.DeviceFamily)
	require.Equal(t, "pw", p.Auth.Password)
	require.Equal(t, "tok-123", c.Hello().Auth.DeviceToken)

	var out map[string]int
	require.NoError(t, c.Request(ctx, "echo", map[string]int{"a": 1}, &out))
	require.Equal(t, 1, out["a"])
	err = c.Request(ctx, "fail", nil, nil)
	var perr *Error
	require.ErrorAs(t, err, &perr)
	require.Equal(t, "UNAVAILABLE", perr.Code)
}

func TestScriptedProtocolFallbackToV3(t *testing.T) {
	sg := newScripted(t, &scriptedGateway{onConnect: func(p ConnectParams) *Response {
		if p.MaxProtocol == 4 {
			return &Response{Type: TypeRes, OK: false, Error: &ErrorShape{Code: "INVALID_REQUEST", Message: "protocol mismatch",
				Details: json.RawMessage(`{"code":"PROTOCOL_MISMATCH","expectedProtocol":3}`)}}
		}
		return nil
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, nodeConfig(t, sg.url()))
	require.NoError(t, err)
	defer c.Close()
	first, second := <-sg.connects, <-sg.connects
	require.Equal(t, 4, first.MaxProtocol)
	require.Equal(t, 3, second.MinProtocol)
	require.Equal(t, 3, second.MaxProtocol)
	require.Empty(t, second.Client.DeviceFamily)
}

func TestScriptedFatalErrors(t *testing.T) {
	for _, code := range []string{"AUTH_PASSWORD_MISMATCH", "AUTH_DEVICE_TOKEN_MISMATCH", "AUTH_BOOTSTRAP_TOKEN_INVALID", "CLIENT_VERSION_MISMATCH", "PAIRING_REQUIRED"} {
		t.Run(code, func(t *testing.T) {
			sg := newScripted(t, &scriptedGateway{onConnect: func(ConnectParams) *Response {
				return &Response{Type: TypeRes, OK: false, Error: &ErrorShape{Code: "UNAUTHORIZED", Message: "no",
					Details: json.RawMessage(`{"code":"` + code + `"}`)}}
			}})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := Dial(ctx, nodeConfig(t, sg.url()))
			require.Error(t, err)
			require.Equal(t, code, DetailsCode(err))
			require.Equal(t, code != "PAIRING_REQUIRED", IsFatal(err))
		})
	}
}

func TestScriptedTickWatchdogClosesConnection(t *testing.T) {
	sg := newScripted(t, &scriptedGateway{tickMs: 100, afterHello: func(ws *websocket.Conn) {
		// silence: no ticks, no frames; wait for the client to close
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				if ce, ok := err.(*websocket.CloseError); ok {
					require.Equal(t, 4000, ce.Code)
				}
				return
			}
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, nodeConfig(t, sg.url()))
	require.NoError(t, err)
	select {
	case <-c.Done():
		require.ErrorIs(t, c.Err(), ErrTickTimeout)
	case <-ctx.Done():
		t.Fatal("the watchdog never closed a silent connection")
	}
}

func TestScriptedTicksKeepConnectionAlive(t *testing.T) {
	stop := make(chan struct{})
	sg := newScripted(t, &scriptedGateway{tickMs: 100, afterHello: func(ws *websocket.Conn) {
		tk := time.NewTicker(40 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				if ws.WriteJSON(map[string]any{"type": "event", "event": "tick", "payload": map[string]any{"ts": 1}}) != nil {
					return
				}
			}
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, nodeConfig(t, sg.url()))
	require.NoError(t, err)
	// 10 tick intervals pass with ticks flowing: the connection stays open.
	timer := time.NewTimer(time.Second)
	select {
	case <-c.Done():
		t.Fatalf("closed despite ticks: %v", c.Err())
	case <-timer.C:
	}
	close(stop)
	c.Close()
}

func TestPreAuthFrameLimit(t *testing.T) {
	sg := newScripted(t, &scriptedGateway{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := nodeConfig(t, sg.url())
	cfg.PathEnv = strings.Repeat("x", PreAuthFrameLimit)
	_, err := Dial(ctx, cfg)
	require.ErrorIs(t, err, ErrHandshake)
	require.ErrorContains(t, err, "size limit")
}
