// Package fakeprovider is oce's offline model provider for tests: OpenAI
// Responses (SSE, JSON and WebSocket), Chat Completions and Anthropic
// Messages on 127.0.0.1, with programmable faults, prompt triggers and
// request counters. Its SSE shapes are the ones docs/design/codex.md#s4 measured as
// sufficient for Codex 0.169.0. It never logs bodies or credential values.
package fakeprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// API paths the fake serves.
const (
	pathResponses = "/v1/responses"
	pathChat      = "/v1/chat/completions"
	pathMessages  = "/v1/messages"
	pathModels    = "/v1/models"
)

// Defaults.
const (
	DefaultAddr         = "127.0.0.1:0"
	DefaultReply        = "READY from the fake model."
	DefaultSlowInterval = time.Second
	// DefaultSlowDeltas is how many deltas a slow stream sends before the
	// reply (about two minutes at the default interval: longer than any
	// probe attempt cap).
	DefaultSlowDeltas = 120
)

// ErrBadOptions reports unusable Options.
var ErrBadOptions = errors.New("fakeprovider: bad options")

// Options configure the fake provider.
type Options struct {
	// Addr to listen on; default 127.0.0.1:0. Only loopback addresses are
	// accepted unless NonLoopback is set.
	Addr string
	// NonLoopback accepts any listen address: the fake then runs as a
	// Service of a test cluster whose network has no route out (the real
	// node's private namespace), never on a host network.
	NonLoopback bool
	// Reply is the text of every answer; "#<digest of the prompt>" is appended.
	Reply string
	// ValidKeys, when set, are the only accepted bearer / x-api-key values;
	// any other key (or none) gets 401 (json-error-code unless a 401-* fault
	// picks another shape).
	ValidKeys []string
	// Fault applies to every request until SetFault changes it.
	Fault Fault
	// SlowInterval is the pause before each delta in slow mode (default 1 s).
	SlowInterval time.Duration
	// SlowDeltas is the number of padding deltas in slow mode (default 120).
	SlowDeltas int
	// Log receives one record per request (method, path, status); never bodies or keys.
	Log *slog.Logger
}

// RecordedRequest describes one request the fake received, without secrets.
type RecordedRequest struct {
	Method string
	Path   string
	// HeaderNames are the canonical names of the request headers, sorted.
	HeaderNames []string
	// Header holds the request headers with credential values replaced.
	Header http.Header
	Model  string
	Stream bool
	// Prompt is the last user text; Digest its digest.
	Prompt string
	Digest string
	// Tools are the names of the tools the request declared.
	Tools    []string
	BodySize int
	// Upfront is true for an empty `{}` body (the upfront 401 check).
	Upfront bool
	// WebSocket is true for a response.create frame.
	WebSocket bool
	// Status is the HTTP status answered (101 for WebSocket frames).
	Status int
}

// Server is a running fake provider.
type Server struct {
	opts     Options
	ln       net.Listener
	srv      *http.Server
	log      *slog.Logger
	valid    map[string]bool
	requests atomic.Int64
	upfront  atomic.Int64
	prewarm  atomic.Int64
	seq      atomic.Int64

	mu        sync.Mutex
	fault     Fault
	onceFault Fault
	onceLeft  int
	byPath    map[string]int64
	last      RecordedRequest
	done      chan struct{}
}

// Start listens on o.Addr and serves until ctx ends or Close is called.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	if o.Reply == "" {
		o.Reply = DefaultReply
	}
	if o.SlowInterval <= 0 {
		o.SlowInterval = DefaultSlowInterval
	}
	if o.SlowDeltas <= 0 {
		o.SlowDeltas = DefaultSlowDeltas
	}
	if !o.Fault.Valid() {
		return nil, fmt.Errorf("%w: unknown fault %q", ErrBadOptions, o.Fault)
	}
	host, _, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return nil, fmt.Errorf("%w: addr: %v", ErrBadOptions, err)
	}
	if ip := net.ParseIP(host); !o.NonLoopback && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%w: addr %q is not loopback", ErrBadOptions, o.Addr)
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("fakeprovider: listen: %w", err)
	}
	s := &Server{opts: o, ln: ln, log: log, fault: o.Fault, byPath: map[string]int64{}, done: make(chan struct{})}
	if len(o.ValidKeys) > 0 {
		s.valid = map[string]bool{}
		for _, k := range o.ValidKeys {
			s.valid[k] = true
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+pathResponses, s.model(pathResponses))
	mux.HandleFunc("GET "+pathResponses, s.responsesWS)
	mux.HandleFunc("POST "+pathChat, s.model(pathChat))
	mux.HandleFunc("POST "+pathMessages, s.model(pathMessages))
	mux.HandleFunc("GET "+pathModels, s.models)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	go func() { _ = s.srv.Serve(ln) }()
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Close()
		case <-s.done:
		}
	}()
	return s, nil
}

// URL is the base URL, "http://127.0.0.1:PORT"; OpenAI routes live under /v1.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Port is the TCP port the fake listens on.
func (s *Server) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// Requests counts model requests (responses, chat/completions, messages,
// WebSocket response.create frames), excluding the upfront check's `{}`.
func (s *Server) Requests() int64 { return s.requests.Load() }

// UpfrontRequests counts requests whose body was the empty `{}`.
func (s *Server) UpfrontRequests() int64 { return s.upfront.Load() }

// PrewarmRequests counts "generate": false requests (Codex's WebSocket
// warm-up frame); they are not model requests.
func (s *Server) PrewarmRequests() int64 { return s.prewarm.Load() }

// RequestsTo counts every request to path (e.g. "/v1/responses"), of any kind.
func (s *Server) RequestsTo(path string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byPath[path]
}

// SetFault sets the fault for subsequent requests.
func (s *Server) SetFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
}

// SetFaultOnce applies f to the next n requests, then falls back to the
// fault SetFault chose (for "500 then success").
func (s *Server) SetFaultOnce(f Fault, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onceFault, s.onceLeft = f, n
}

// LastRequest describes the most recent request.
func (s *Server) LastRequest() RecordedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.last
	r.Header = r.Header.Clone()
	r.HeaderNames = append([]string(nil), r.HeaderNames...)
	r.Tools = append([]string(nil), r.Tools...)
	return r
}

// Close stops the server and drops open connections.
func (s *Server) Close() error {
	s.mu.Lock()
	select {
	case <-s.done:
		s.mu.Unlock()
		return nil
	default:
		close(s.done)
	}
	s.mu.Unlock()
	err := s.srv.Close()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// takeFault returns the fault of the next request and consumes a SetFaultOnce slot.
func (s *Server) takeFault() Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.onceLeft > 0 {
		s.onceLeft--
		return s.onceFault
	}
	return s.fault
}

func (s *Server) record(r *http.Request, req Request, size, status int, ws bool) {
	names := make([]string, 0, len(r.Header))
	h := r.Header.Clone()
	for k := range h {
		names = append(names, k)
		if sensitiveHeader(k) {
			h[k] = []string{"[redacted]"}
		}
	}
	sort.Strings(names)
	s.mu.Lock()
	s.byPath[r.URL.Path]++
	s.last = RecordedRequest{Method: r.Method, Path: r.URL.Path, HeaderNames: names, Header: h,
		Model: req.Model, Stream: req.Stream, Prompt: req.Prompt, Digest: Digest(req.Prompt), Tools: req.Tools,
		BodySize: size, Upfront: req.Empty, WebSocket: ws, Status: status}
	s.mu.Unlock()
	s.log.Info("fakeprovider.request", "method", r.Method, "path", r.URL.Path, "status", status,
		"upfront", req.Empty, "websocket", ws, "tools", req.Tools)
}

func sensitiveHeader(k string) bool {
	switch strings.ToLower(k) {
	case "authorization", "x-api-key", "cookie", "proxy-authorization", "openai-organization", "chatgpt-account-id":
		return true
	}
	return false
}

// key extracts the credential: "Authorization: Bearer X" or "x-api-key: X".
func key(r *http.Request) string {
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return k
	}
	a := r.Header.Get("Authorization")
	if len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return ""
}

func (s *Server) authorized(r *http.Request) bool {
	return !upfrontOnly(r) && (s.valid == nil || s.valid[key(r)])
}

// authorizedFor is authorized for a model request; the upfront check's
// empty request also accepts an upfront-only key.
func (s *Server) authorizedFor(r *http.Request, req Request) bool {
	return s.authorized(r) || req.Empty && upfrontOnly(r)
}

// model serves one POST model endpoint.
func (s *Server) model(path string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n := s.seq.Add(1)
		setCommonHeaders(w, path, n)
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil {
			s.record(r, Request{}, len(body), http.StatusBadRequest, false)
			writeError(w, http.StatusBadRequest, "could not read body")
			return
		}
		req, err := DecodeRequest(path, body)
		if err != nil {
			s.record(r, Request{}, len(body), http.StatusBadRequest, false)
			writeError(w, http.StatusBadRequest, "invalid JSON body")
			return
		}
		switch {
		case req.Empty:
			s.upfront.Add(1)
		case req.Prewarm:
			s.prewarm.Add(1)
		default:
			s.requests.Add(1)
		}
		// A warm-up frame neither takes nor triggers faults, so
		// SetFaultOnce counts only real model requests.
		f := FaultNone
		if !req.Prewarm {
			f = s.takeFault()
			if tf := triggerFault(req.Prompt); tf != FaultNone {
				f = tf
			}
		}
		status := s.answer(w, r, path, req, f, n)
		s.record(r, req, len(body), status, false)
	}
}

// answer writes the response for a decoded request and returns its status.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, path string, req Request, f Fault, n int64) int {
	switch {
	case !s.authorizedFor(r, req) || f.Is401():
		write401(w, f)
		return http.StatusUnauthorized
	case f == Fault403 || f == Fault429 || f == Fault500:
		writeStatusFault(w, f)
		switch f {
		case Fault403:
			return http.StatusForbidden
		case Fault429:
			return http.StatusTooManyRequests
		}
		return http.StatusInternalServerError
	case req.Empty:
		writeError(w, http.StatusBadRequest, "Missing required parameter: 'model'.")
		return http.StatusBadRequest
	}
	t := s.turn(req, f)
	t.n = n
	t.prewarm = req.Prewarm
	switch path {
	case pathResponses:
		return s.serveResponses(w, r, t)
	case pathChat:
		return s.serveChat(w, r, t)
	default:
		return s.serveMessages(w, r, t)
	}
}

// turn is what one answer contains, whatever the API.
// toolFileRe finds TriggerToolFile's file name.
var toolFileRe = regexp.MustCompile(regexp.QuoteMeta(TriggerToolFile) + `([A-Za-z0-9._-]{1,64})`)

type turn struct {
	n       int64
	model   string
	stream  bool
	text    string // reply text ("" for a tool call)
	tool    string // tool name for a tool call
	args    string // tool arguments JSON
	fault   Fault  // slow, drop, response-failed or none
	prewarm bool   // "generate": false: an empty completed response
	slowGap time.Duration
	slowN   int
}

func (s *Server) turn(req Request, f Fault) turn {
	t := turn{model: req.Model, stream: req.Stream, fault: f,
		slowGap: s.opts.SlowInterval, slowN: s.opts.SlowDeltas}
	if t.model == "" {
		t.model = "fake-model"
	}
	if strings.Contains(req.Prompt, TriggerTool) && !req.ToolResult {
		t.tool = req.ToolName
		if t.tool == "" {
			t.tool = "exec_command"
		}
		out := "echo hello-from-tool"
		if m := toolFileRe.FindStringSubmatch(req.Prompt); m != nil {
			out += " > " + m[1]
		}
		t.args = toolArgs("cmd", out+" && id -u")
		if t.tool != "exec_command" {
			t.args = toolArgs("command", out)
		}
		return t
	}
	t.text = s.opts.Reply + " #" + Digest(req.Prompt)
	for _, e := range req.Echo {
		t.text += " [" + e + "]"
	}
	if req.ToolResult {
		t.text = "Tool result received. " + t.text
	}
	return t
}

// toolArgs is a tool call's arguments object {key: cmd}, with & < > kept
// as they are (a shell command, not HTML).
func toolArgs(key, cmd string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]string{key: cmd})
	return strings.TrimSpace(b.String())
}

// deltas splits the reply into the chunks a stream sends.
func (t turn) deltas() []string {
	var out []string
	for i := 0; i < len(t.text); i += 8 {
		out = append(out, t.text[i:min(i+8, len(t.text))])
	}
	return out
}

// pace waits before a delta in slow mode; false when the client went away.
func (t turn) pace(ctx context.Context) bool {
	if t.fault != FaultSlow {
		return true
	}
	tm := time.NewTimer(t.slowGap)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	setCommonHeaders(w, pathModels, s.seq.Add(1))
	status := http.StatusOK
	if !s.authorized(r) {
		write401(w, FaultNone)
		status = http.StatusUnauthorized
	} else {
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{
			map[string]any{"id": "fake-model", "object": "model", "created": 0, "owned_by": "oce-fake"},
			map[string]any{"id": "gpt-6-sol", "object": "model", "created": 0, "owned_by": "oce-fake"},
		}})
	}
	s.record(r, Request{}, 0, status, false)
}

// setCommonHeaders adds the provider-like headers (a request id, and one
// header outside the upfront check's allow-list).
func setCommonHeaders(w http.ResponseWriter, path string, n int64) {
	id := fmt.Sprintf("req_fake%d", n)
	if path == pathMessages {
		w.Header().Set("Request-Id", id)
	} else {
		w.Header().Set("X-Request-Id", id)
	}
	w.Header().Set("X-Fake-Provider", "oce")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
}

// sse writes server-sent events.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, rc: http.NewResponseController(w)}
}

// event writes "event: name" (when set) and "data: json".
func (e *sse) event(name string, v any) error {
	var b []byte
	switch d := v.(type) {
	case string:
		b = []byte(d)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return err
		}
	}
	var sb strings.Builder
	if name != "" {
		sb.WriteString("event: " + name + "\n")
	}
	sb.WriteString("data: ")
	sb.Write(b)
	sb.WriteString("\n\n")
	if _, err := io.WriteString(e.w, sb.String()); err != nil {
		return err
	}
	return e.rc.Flush()
}

// drop aborts the response mid-stream (the client sees a dropped connection).
func drop() { panic(http.ErrAbortHandler) }
