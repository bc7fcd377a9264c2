// Package appserver is a Go client for the JSON-RPC protocol of the real
// `codex app-server` over its WebSocket listener (docs/design/codex.md#s6): initialize /
// initialized, thread/start, turn/start with streamed items, turn/completed,
// turn/interrupt, and server→client approval requests answered by a policy.
//
// Messages are routed by id (responses) and by method plus thread/turn ids
// (notifications), never by arrival order: the server may send turn/started
// before the turn/start result. A turn whose connection closes before its
// turn/completed (the app-server sends none when it is stopped with SIGTERM)
// is reported interrupted, never completed.
package appserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Limits and defaults.
const (
	// MaxMessageBytes bounds one incoming frame (turn/completed carries every
	// item of the turn, tool output included).
	MaxMessageBytes = 32 << 20
	// InterruptGrace bounds the wait for turn/completed after RunTurn sent
	// turn/interrupt because its context ended (the server answers within
	// milliseconds, docs/design/codex.md#s6).
	InterruptGrace = 5 * time.Second
	// DefaultClientName is the initialize clientInfo.name.
	DefaultClientName = "oce"
)

var (
	// ErrClosed reports a call on, or a call cut off by, a closed connection.
	ErrClosed = errors.New("appserver: connection closed")
	// ErrUnauthorized reports a handshake the server refused with 401/403
	// (missing or wrong capability token).
	ErrUnauthorized = errors.New("appserver: unauthorized")
	// ErrDial reports a connection that could not be opened.
	ErrDial = errors.New("appserver: dial failed")
	// ErrProtocol reports an answer that does not have the documented shape.
	ErrProtocol = errors.New("appserver: protocol error")
)

// Option configures Dial.
type Option func(*options)

type options struct {
	info       ClientInfo
	policy     ApprovalPolicy
	notify     func(Notification)
	httpClient *http.Client
	noInit     bool
}

// WithClientInfo sets initialize's clientInfo.
func WithClientInfo(ci ClientInfo) Option { return func(o *options) { o.info = ci } }

// WithApprovalPolicy answers server approval requests; the default declines.
func WithApprovalPolicy(p ApprovalPolicy) Option { return func(o *options) { o.policy = p } }

// WithNotifications receives every notification, in arrival order, on the
// read goroutine: fn must not block.
func WithNotifications(fn func(Notification)) Option { return func(o *options) { o.notify = fn } }

// WithHTTPClient sets the handshake's HTTP client.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// WithoutInitialize skips initialize/initialized (protocol tests).
func WithoutInitialize() Option { return func(o *options) { o.noInit = true } }

// Client is one WebSocket connection to an app-server. Its methods are safe
// for concurrent use.
type Client struct {
	conn   *websocket.Conn
	opts   options
	ctx    context.Context // the connection's lifetime
	cancel context.CancelFunc
	nextID atomic.Int64

	mu      sync.Mutex
	pending map[string]chan *message
	subs    map[*subscription]struct{}
	err     error

	closed chan struct{}
	init   InitializeResult
}

// Dial opens a WebSocket to url ("ws://127.0.0.1:18790") presenting token as
// `Authorization: Bearer <token>` (the capability-token auth of
// `--ws-auth capability-token`), then runs initialize and initialized.
// A refused token gives ErrUnauthorized.
func Dial(ctx context.Context, url, token string, opt ...Option) (*Client, error) {
	o := options{info: ClientInfo{Name: DefaultClientName, Version: "1"}, policy: DeclineAll}
	for _, f := range opt {
		f(&o)
	}
	conn, err := dial(ctx, url, token, o.httpClient)
	if err != nil {
		return nil, err
	}
	conn.SetReadLimit(MaxMessageBytes)
	cctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		conn: conn, opts: o, ctx: cctx, cancel: cancel,
		pending: map[string]chan *message{}, subs: map[*subscription]struct{}{},
		closed: make(chan struct{}),
	}
	go c.readLoop()
	if o.noInit {
		return c, nil
	}
	if err := c.Call(ctx, MethodInitialize, map[string]any{
		"clientInfo":   o.info,
		"capabilities": map[string]any{"experimentalApi": false},
	}, &c.init); err != nil {
		c.Close()
		return nil, fmt.Errorf("appserver: initialize: %w", err)
	}
	if err := c.Notify(ctx, MethodInitialized, nil); err != nil {
		c.Close()
		return nil, fmt.Errorf("appserver: initialized: %w", err)
	}
	return c, nil
}

func dial(ctx context.Context, url, token string, hc *http.Client) (*websocket.Conn, error) {
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	conn, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: hc, HTTPHeader: h})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		if resp != nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
			return nil, fmt.Errorf("%w: handshake status %d", ErrUnauthorized, resp.StatusCode)
		}
		return nil, fmt.Errorf("%w: %w", ErrDial, err)
	}
	return conn, nil
}

// Probe opens a WebSocket with token and drops it again: the readiness
// check that the listener accepts the capability token. It sends nothing;
// the handshake succeeding is the answer.
func Probe(ctx context.Context, url, token string) error {
	conn, err := dial(ctx, url, token, nil)
	if err != nil {
		return err
	}
	_ = conn.CloseNow()
	return nil
}

// Initialized returns the initialize answer.
func (c *Client) Initialized() InitializeResult { return c.init }

// Done is closed when the connection has ended.
func (c *Client) Done() <-chan struct{} { return c.closed }

// Err returns why the connection ended (wrapping ErrClosed), or nil while open.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection; pending calls fail with ErrClosed.
func (c *Client) Close() error {
	err := c.conn.Close(websocket.StatusNormalClosure, "")
	c.cancel()
	<-c.closed
	return err
}

func (c *Client) write(ctx context.Context, m any) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := c.conn.Write(ctx, websocket.MessageText, b); err != nil {
		if cerr := c.Err(); cerr != nil {
			return cerr
		}
		return fmt.Errorf("%w: write: %w", ErrClosed, err)
	}
	return nil
}

// Notify sends a client notification.
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	m := map[string]any{"method": method}
	if params != nil {
		m["params"] = params
	}
	return c.write(ctx, m)
}

// send writes a request and returns the channel its response arrives on.
func (c *Client) send(ctx context.Context, method string, params any) (string, chan *message, error) {
	id := c.nextID.Add(1) - 1
	key := "n:" + strconv.FormatInt(id, 10)
	ch := make(chan *message, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return "", nil, err
	}
	c.pending[key] = ch
	c.mu.Unlock()
	req := map[string]any{"id": id, "method": method}
	if params != nil {
		req["params"] = params
	}
	if err := c.write(ctx, req); err != nil {
		c.forget(key)
		return "", nil, err
	}
	return key, ch, nil
}

func (c *Client) forget(key string) {
	c.mu.Lock()
	delete(c.pending, key)
	c.mu.Unlock()
}

// Call sends a request and decodes its result into result (nil discards it).
// A JSON-RPC error comes back as *RPCError (errors.Is ErrRPC).
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	key, ch, err := c.send(ctx, method, params)
	if err != nil {
		return err
	}
	select {
	case m := <-ch:
		return decodeResult(m, result)
	case <-ctx.Done():
		c.forget(key)
		return ctx.Err()
	case <-c.closed:
		// A response may have raced the close.
		select {
		case m := <-ch:
			return decodeResult(m, result)
		default:
		}
		return c.Err()
	}
}

func decodeResult(m *message, result any) error {
	if m.Error != nil {
		return m.Error
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(m.Result, result); err != nil {
		return fmt.Errorf("%w: result: %w", ErrProtocol, err)
	}
	return nil
}

// readLoop routes every frame until the connection ends.
func (c *Client) readLoop() {
	var err error
	for {
		var b []byte
		_, b, err = c.conn.Read(c.ctx)
		if err != nil {
			break
		}
		var m message
		if json.Unmarshal(b, &m) != nil {
			continue // the server drops non-JSON too; nothing to route
		}
		switch m.kind() {
		case kindResponse:
			c.mu.Lock()
			key := idKey(m.ID)
			ch, ok := c.pending[key]
			delete(c.pending, key)
			c.mu.Unlock()
			if ok {
				ch <- &m
			}
		case kindRequest:
			go c.serveRequest(&m)
		case kindNotification:
			c.dispatch(Notification{Method: m.Method, Params: m.Params})
		}
	}
	c.mu.Lock()
	c.err = fmt.Errorf("%w: %w", ErrClosed, err)
	subs := c.subs
	c.subs = map[*subscription]struct{}{}
	c.mu.Unlock()
	c.cancel()
	close(c.closed)
	for s := range subs {
		s.wake()
	}
}

func (c *Client) dispatch(n Notification) {
	if c.opts.notify != nil {
		c.opts.notify(n)
	}
	thread, _ := scopeOf(n.Params)
	c.mu.Lock()
	for s := range c.subs {
		if s.thread == "" || s.thread == thread {
			s.push(n)
		}
	}
	c.mu.Unlock()
}

// subscription queues the notifications of one thread without ever blocking
// the read loop.
type subscription struct {
	thread string
	mu     sync.Mutex
	q      []Notification
	signal chan struct{}
}

func (s *subscription) push(n Notification) {
	s.mu.Lock()
	s.q = append(s.q, n)
	s.mu.Unlock()
	s.wake()
}

func (s *subscription) wake() {
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

func (s *subscription) drain() []Notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.q
	s.q = nil
	return q
}

func (c *Client) subscribe(thread string) *subscription {
	s := &subscription{thread: thread, signal: make(chan struct{}, 1)}
	c.mu.Lock()
	c.subs[s] = struct{}{}
	c.mu.Unlock()
	return s
}

func (c *Client) unsubscribe(s *subscription) {
	c.mu.Lock()
	delete(c.subs, s)
	c.mu.Unlock()
}
