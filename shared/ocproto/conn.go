package ocproto

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Limits and timeouts of the protocol.
const (
	PreAuthFrameLimit     = 64 << 10 // frames a client sends before hello-ok
	DefaultMaxPayload     = 26214400 // until hello-ok names policy.maxPayload
	DefaultTickInterval   = 30 * time.Second
	ChallengeTimeout      = 15 * time.Second
	DefaultRequestTimeout = 30 * time.Second
	CloseTickTimeout      = websocket.StatusCode(4000)
)

// Config configures one connection.
type Config struct {
	URL         string
	Role        string
	Client      ClientInfo
	Scopes      []string
	Caps        []string
	Commands    []string
	Permissions map[string]bool
	PathEnv     string
	Identity    *Identity
	Credentials Credentials
	// MinProtocol/MaxProtocol default to 4/4. A node-host client falls back
	// to 3/3 when the gateway answers PROTOCOL_MISMATCH expecting 3.
	MinProtocol, MaxProtocol int
	// ChallengeTimeout bounds the wait for connect.challenge and hello-ok.
	ChallengeTimeout time.Duration
	// OnEvent receives every event but tick, in order, from the reader
	// goroutine; it must not block.
	OnEvent func(Event)
	Log     *slog.Logger
	// Now is the clock for signatures (tests inject one).
	Now func() time.Time
}

// Conn is an authenticated gateway connection.
type Conn struct {
	ws    *websocket.Conn
	cfg   Config
	hello HelloOK
	log   *slog.Logger

	seq         atomic.Int64
	lastInbound atomic.Int64 // unix nanos
	maxPayload  int64

	mu      sync.Mutex
	pending map[string]chan *Response
	closed  bool
	err     error
	done    chan struct{}
}

// Dial connects, answers the challenge and waits for hello-ok.
func Dial(ctx context.Context, cfg Config) (*Conn, error) {
	if cfg.MinProtocol == 0 {
		cfg.MinProtocol = ProtocolVersion
	}
	if cfg.MaxProtocol == 0 {
		cfg.MaxProtocol = ProtocolVersion
	}
	c, err := dialOnce(ctx, cfg)
	var perr *Error
	if err != nil && errors.As(err, &perr) && perr.DetailsCode == "PROTOCOL_MISMATCH" &&
		perr.ExpectedProtocol() == LegacyProtocolVersion && cfg.Role == RoleNode && cfg.Client.ID == ClientNodeHost {
		legacy := cfg
		legacy.MinProtocol, legacy.MaxProtocol = LegacyProtocolVersion, LegacyProtocolVersion
		legacy.Client.DeviceFamily = "" // the v3 envelope has no device family
		legacy.Client.ModelIdentifier = ""
		return dialOnce(ctx, legacy)
	}
	return c, err
}

func dialOnce(ctx context.Context, cfg Config) (*Conn, error) {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	timeout := cfg.ChallengeTimeout
	if timeout <= 0 {
		timeout = ChallengeTimeout
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	ws, _, err := websocket.Dial(hctx, cfg.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: dial: %v", ErrHandshake, err)
	}
	ws.SetReadLimit(DefaultMaxPayload)
	fail := func(err error) (*Conn, error) {
		ws.Close(websocket.StatusPolicyViolation, "handshake failed")
		return nil, err
	}

	ch, err := readChallenge(hctx, ws)
	if err != nil {
		return fail(err)
	}
	auth, sigToken := SelectAuth(cfg.Credentials)
	params := ConnectParams{MinProtocol: cfg.MinProtocol, MaxProtocol: cfg.MaxProtocol, Client: cfg.Client,
		Caps: cfg.Caps, Commands: cfg.Commands, Permissions: cfg.Permissions, PathEnv: cfg.PathEnv,
		Role: cfg.Role, Scopes: cfg.Scopes}
	if params.Scopes == nil {
		params.Scopes = []string{}
	}
	if auth != (ConnectAuth{}) {
		params.Auth = &auth
	}
	if cfg.Identity != nil {
		signedAt := ch.TS
		if signedAt == 0 {
			signedAt = now().UnixMilli()
		}
		payload := PayloadV3(SignatureParams{DeviceID: cfg.Identity.DeviceID, ClientID: cfg.Client.ID,
			ClientMode: cfg.Client.Mode, Role: cfg.Role, Scopes: params.Scopes, SignedAtMs: signedAt,
			Token: sigToken, Nonce: ch.Nonce, Platform: cfg.Client.Platform, DeviceFamily: cfg.Client.DeviceFamily})
		params.Device = &DeviceProof{ID: cfg.Identity.DeviceID, PublicKey: cfg.Identity.PublicKeyB64(),
			Signature: cfg.Identity.Sign(payload), SignedAt: signedAt, Nonce: ch.Nonce}
	}
	c := &Conn{ws: ws, cfg: cfg, log: log, pending: map[string]chan *Response{}, done: make(chan struct{}),
		maxPayload: PreAuthFrameLimit}
	id := c.nextID()
	if err := c.writeFrame(hctx, Request{Type: TypeReq, ID: id, Method: "connect", Params: mustJSON(params)}); err != nil {
		return fail(fmt.Errorf("%w: send connect: %v", ErrHandshake, err))
	}
	res, err := readResponse(hctx, ws, id)
	if err != nil {
		return fail(err)
	}
	if !res.OK {
		if res.Error == nil {
			return fail(fmt.Errorf("%w: connect refused without an error", ErrHandshake))
		}
		return fail(newError("connect", res.Error))
	}
	if err := json.Unmarshal(res.Payload, &c.hello); err != nil || c.hello.Type != "hello-ok" {
		return fail(fmt.Errorf("%w: connect answered without hello-ok", ErrHandshake))
	}
	c.maxPayload = c.hello.Policy.MaxPayload
	if c.maxPayload <= 0 {
		c.maxPayload = DefaultMaxPayload
	}
	ws.SetReadLimit(c.maxPayload)
	c.touch()
	go c.readLoop()
	go c.watchdog()
	return c, nil
}

func readChallenge(ctx context.Context, ws *websocket.Conn) (Challenge, error) {
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			return Challenge{}, fmt.Errorf("%w: waiting for connect.challenge: %v", ErrHandshake, err)
		}
		f, err := DecodeFrame(b)
		if err != nil {
			return Challenge{}, fmt.Errorf("%w: %v", ErrHandshake, err)
		}
		if f.Event == nil || f.Event.Event != "connect.challenge" {
			continue
		}
		var ch Challenge
		if err := json.Unmarshal(f.Event.Payload, &ch); err != nil || ch.Nonce == "" {
			return Challenge{}, fmt.Errorf("%w: connect.challenge without a nonce", ErrHandshake)
		}
		return ch, nil
	}
}

func readResponse(ctx context.Context, ws *websocket.Conn, id string) (*Response, error) {
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w: waiting for hello-ok: %v", ErrHandshake, err)
		}
		f, err := DecodeFrame(b)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrHandshake, err)
		}
		if f.Res != nil && f.Res.ID == id {
			return f.Res, nil
		}
	}
}

// Hello returns the hello-ok payload.
func (c *Conn) Hello() HelloOK { return c.hello }

// Done is closed when the connection ends; Err then says why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended, or nil while it is open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection normally.
func (c *Conn) Close() error {
	c.shutdown(ErrClosed, websocket.StatusNormalClosure, "")
	return nil
}

// Request sends method with params and decodes the payload of a successful
// response into out (when non-nil). A failed response is an *Error.
func (c *Conn) Request(ctx context.Context, method string, params any, out any) error {
	raw, err := c.RequestRaw(ctx, method, params)
	if err != nil {
		return err
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("ocproto: %s: decode payload: %w", method, err)
		}
	}
	return nil
}

// RequestRaw is Request returning the raw payload.
func (c *Conn) RequestRaw(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := c.nextID()
	ch := make(chan *Response, 1)
	c.mu.Lock()
	if c.closed {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	var p json.RawMessage
	if params != nil {
		p = mustJSON(params)
	}
	if err := c.writeFrame(ctx, Request{Type: TypeReq, ID: id, Method: method, Params: p}); err != nil {
		return nil, err
	}
	select {
	case res := <-ch:
		if !res.OK {
			if res.Error == nil {
				return nil, &Error{Method: method, Code: "UNAVAILABLE", Message: "failed without an error"}
			}
			return nil, newError(method, res.Error)
		}
		return res.Payload, nil
	case <-c.done:
		return nil, c.Err()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *Conn) writeFrame(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if int64(len(b)) > c.maxPayload {
		return fmt.Errorf("%w: %d bytes > %d", ErrFrameTooLarge, len(b), c.maxPayload)
	}
	return c.ws.Write(ctx, websocket.MessageText, b)
}

func (c *Conn) readLoop() {
	for {
		_, b, err := c.ws.Read(context.Background())
		if err != nil {
			c.shutdown(fmt.Errorf("%w: %v", ErrClosed, err), websocket.StatusNormalClosure, "")
			return
		}
		c.touch()
		f, err := DecodeFrame(b)
		if err != nil {
			c.log.Warn("dropped malformed gateway frame", "error", err.Error())
			continue
		}
		switch {
		case f.Res != nil:
			c.mu.Lock()
			ch := c.pending[f.Res.ID]
			c.mu.Unlock()
			if ch != nil {
				ch <- f.Res
			}
		case f.Event != nil:
			if f.Event.Event != "tick" && c.cfg.OnEvent != nil {
				c.cfg.OnEvent(*f.Event)
			}
		case f.Req != nil:
			// The gateway pushes work as events; answer stray requests so
			// the peer does not wait for its timeout.
			go func(id, method string) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = c.writeFrame(ctx, Response{Type: TypeRes, ID: id, OK: false,
					Error: &ErrorShape{Code: "UNAVAILABLE", Message: "method not supported: " + method}})
			}(f.Req.ID, f.Req.Method)
		}
	}
}

func (c *Conn) watchdog() {
	interval := time.Duration(c.hello.Policy.TickIntervalMs) * time.Millisecond
	if interval <= 0 {
		interval = DefaultTickInterval
	}
	t := time.NewTicker(interval / 4)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			if time.Since(time.Unix(0, c.lastInbound.Load())) > 2*interval {
				c.shutdown(ErrTickTimeout, CloseTickTimeout, "tick timeout")
				return
			}
		}
	}
}

func (c *Conn) shutdown(err error, code websocket.StatusCode, reason string) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.err = err
	close(c.done)
	c.mu.Unlock()
	_ = c.ws.Close(code, reason)
}

func (c *Conn) touch() { c.lastInbound.Store(time.Now().UnixNano()) }

func (c *Conn) nextID() string {
	var r [8]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%d:%s", c.seq.Add(1), hex.EncodeToString(r[:]))
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("ocproto: marshal %T: %v", v, err))
	}
	return b
}
