package nodehost

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"oce.dev/oce/shared/backoff"
	"oce.dev/oce/shared/ocproto"
)

// Config configures a node host.
type Config struct {
	StateDir       string   // private: identity, device token, gateway URL (0700)
	Workspace      string   // the Agent workspace the node serves
	SkillRoots     []string // managed Skill roots (read-only)
	EnrollmentFile string   // one-use setup code file (mode 0600); deleted after enrollment
	GatewayURL     string   // overrides the setup code's URL (the URL as seen from this node)
	DisplayName    string
	InstanceID     string
	// FileOnly serves only the workspace file commands (the Codex
	// companion node); otherwise system.run and system.which too.
	FileOnly bool
	// IdentityFile is a device identity the coordinator provisioned (mode
	// 0600, contract.EnvNodehostIdentity): adopted as the node's identity,
	// then deleted.
	IdentityFile string
	// WorkerCommand, when set, enables session workers with WorkerCapacity slots.
	WorkerCommand  []string
	WorkerCapacity int
	Log            *slog.Logger
	// ChallengeTimeout and Backoff bounds are injectable for tests.
	ChallengeTimeout time.Duration
	BackoffMin       time.Duration
	BackoffMax       time.Duration
	// PairingCheck overrides PairingCheckInterval (tests).
	PairingCheck time.Duration
}

// Host is a running node host.
type Host struct {
	cfg     Config
	log     *slog.Logger
	policy  *Policy
	workers *Workers
	state   state
	id      *ocproto.Identity
	baseEnv []string

	// fileSlots bounds concurrent file operations (MaxConcurrentFileOps).
	fileSlots chan struct{}
	// onResult receives node.invoke.result payloads when there is no
	// connection (tests observe invokes through it).
	onResult func(map[string]any)

	// pairingKick wakes the pairing watch of the live connection when the
	// gateway reports a resolved pairing for this node.
	pairingKick chan struct{}

	mu      sync.Mutex
	conn    *ocproto.Conn
	invokes map[string]context.CancelFunc
	hellos  int
	// pairingChecks counts the pairing watch's answered checks (tests).
	pairingChecks int
}

// New validates cfg and prepares the state directory and identity.
func New(cfg Config) (*Host, error) {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Workspace == "" || cfg.StateDir == "" {
		return nil, errors.New("nodehost: workspace and state dir are required")
	}
	ws, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(ws, 0o700); err != nil {
		return nil, err
	}
	policy, err := NewPolicy(ws, cfg.SkillRoots)
	if err != nil {
		return nil, err
	}
	stateDir, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	if policy.Serves(stateDir) {
		return nil, ErrStateServed
	}
	for _, private := range []string{cfg.EnrollmentFile, cfg.IdentityFile} {
		if private == "" {
			continue
		}
		if f, err := filepath.Abs(private); err != nil || policy.Serves(f) {
			return nil, ErrStateServed
		}
	}
	h := &Host{cfg: cfg, log: log, policy: policy, state: state{dir: stateDir}, invokes: map[string]context.CancelFunc{},
		baseEnv: sanitizedEnv(os.Environ()), fileSlots: make(chan struct{}, MaxConcurrentFileOps),
		pairingKick: make(chan struct{}, 1)}
	if err := h.state.ensure(); err != nil {
		return nil, err
	}
	if policy.Serves(stateDir) { // again, now that symlinks in its path resolve
		return nil, ErrStateServed
	}
	if h.id, err = h.state.identity(cfg.IdentityFile); err != nil {
		return nil, err
	}
	if len(cfg.WorkerCommand) > 0 {
		capacity := cfg.WorkerCapacity
		if capacity == 0 {
			capacity = DefaultWorkerCapacity
		}
		if h.workers, err = NewWorkers(capacity, filepath.Join(ws, ".workers"), cfg.WorkerCommand, h.baseEnv); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// DeviceID is the node's device id.
func (h *Host) DeviceID() string { return h.id.DeviceID }

// Workers exposes the admission core (nil when workers are disabled).
func (h *Host) Workers() *Workers { return h.workers }

var credentialEnv = regexp.MustCompile(`^(OPENAI_|ANTHROPIC_|CODEX_|OPENCLAW_GATEWAY_PASSWORD$|APP_SERVER_TOKEN$)|(TOKEN|PASSWORD|SECRET|API_KEY|APIKEY)`)

// sanitizedEnv drops credential-looking variables from the node's environment
// before anything inherits it.
func sanitizedEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if credentialEnv.MatchString(strings.ToUpper(k)) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func (h *Host) caps() []string {
	if h.cfg.FileOnly {
		return []string{"file"}
	}
	return []string{"file", "system"}
}

func (h *Host) commands() []string {
	cmds := []string{"dir.list", "file.fetch", "file.stat", "file.write", "workspace.memory"}
	if !h.cfg.FileOnly {
		cmds = append(cmds, "system.run", "system.which")
	}
	if h.workers != nil {
		cmds = append(cmds, "worker.cancel.v1", "worker.launch.v1", "worker.status.v1")
	}
	return cmds
}

// Run enrolls (first start) or reconnects with the device token, serves
// commands, and reconnects with backoff until ctx ends. It returns ErrFatal
// (wrapped) when the gateway refuses the node for good, and the enrollment
// errors when the node cannot enroll.
func (h *Host) Run(ctx context.Context) error {
	token := h.state.token()
	code, err := readEnrollment(h.cfg.EnrollmentFile)
	if err != nil {
		return err
	}
	url := h.state.gatewayURL()
	if code != nil && token == "" {
		if code.ExpiresAtMs > 0 && time.Now().UnixMilli() > code.ExpiresAtMs {
			return ErrEnrollmentExpired
		}
		url = code.URL
	}
	if code != nil && url == "" {
		url = code.URL
	}
	if h.cfg.GatewayURL != "" {
		url = h.cfg.GatewayURL
	}
	if token == "" && code == nil {
		return ErrNotEnrolled
	}
	memCtx, stopMem := context.WithCancel(ctx)
	defer stopMem()
	go func() {
		_ = h.watchMemory(memCtx, h.sendMemoryEvent)
	}()
	bo := backoff.Sequence{Policy: backoff.Policy{Base: cmp.Or(h.cfg.BackoffMin, ocproto.ReconnectMin),
		Max: cmp.Or(h.cfg.BackoffMax, ocproto.ReconnectMax)}}
	for {
		creds := ocproto.Credentials{StoredDeviceToken: token}
		if token == "" && code != nil {
			creds.BootstrapToken = code.BootstrapToken
		}
		conn, err := ocproto.Dial(ctx, ocproto.Config{URL: url, Role: ocproto.RoleNode,
			Client: ocproto.NodeHostClient(h.displayName(), ocproto.ClientVersion, h.cfg.InstanceID),
			Caps:   []string{"file", "system"}, Commands: h.commands(), Identity: h.id, Credentials: creds,
			PathEnv: os.Getenv("PATH"), OnEvent: h.onEvent, Log: h.log, ChallengeTimeout: h.cfg.ChallengeTimeout})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			switch dc := ocproto.DetailsCode(err); {
			case dc == "AUTH_DEVICE_TOKEN_MISMATCH":
				_ = h.state.clearToken()
				h.log.Error("gateway rejected the device token; cleared it", "code", dc)
				return fmt.Errorf("%w: %v", ErrFatal, err)
			case ocproto.IsFatal(err):
				h.log.Error("gateway refused the node", "code", dc)
				return fmt.Errorf("%w: %v", ErrFatal, err)
			}
			d := bo.Next()
			h.log.Warn("gateway connection failed; retrying", "code", ocproto.DetailsCode(err), "retryInMs", d.Milliseconds())
			if !sleepCtx(ctx, d) {
				return nil
			}
			continue
		}
		bo.Reset()
		hello := conn.Hello()
		if t := hello.Auth.DeviceToken; t != "" && t != token {
			if err := h.state.saveToken(t); err != nil {
				conn.Close()
				return fmt.Errorf("nodehost: persist device token: %w", err)
			}
			token = t
		}
		if err := h.state.saveGatewayURL(url); err != nil {
			h.log.Warn("could not persist the gateway URL", "error", err.Error())
		}
		if code != nil && h.cfg.EnrollmentFile != "" {
			if err := os.Remove(h.cfg.EnrollmentFile); err != nil && !errors.Is(err, os.ErrNotExist) {
				h.log.Warn("could not delete the consumed enrollment file", "error", err.Error())
			}
			code = nil
		}
		h.mu.Lock()
		h.conn = conn
		h.hellos++
		h.mu.Unlock()
		h.log.Info("connected to gateway", "authMethod", hello.Auth.Method, "protocol", hello.Protocol)
		h.announce(ctx, conn)
		watchCtx, stopWatch := context.WithCancel(ctx)
		go pairingWatch{interval: cmp.Or(h.cfg.PairingCheck, PairingCheckInterval), confirm: pairingConfirmDelay,
			kick: h.pairingKick, reconnect: func() { _ = conn.Close() }}.run(watchCtx, h, conn)
		select {
		case <-ctx.Done():
			stopWatch()
			conn.Close()
			if h.workers != nil {
				stopCtx, cancel := context.WithTimeout(context.Background(), WorkerStopBudget+time.Second)
				h.workers.StopAll(stopCtx)
				cancel()
			}
			return nil
		case <-conn.Done():
			h.log.Warn("gateway connection ended; reconnecting", "reason", errString(conn.Err()))
		}
		stopWatch()
		h.mu.Lock()
		h.conn = nil
		h.mu.Unlock()
		if !sleepCtx(ctx, bo.Next()) {
			return nil
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (h *Host) displayName() string {
	if h.cfg.DisplayName != "" {
		return h.cfg.DisplayName
	}
	return "oce-nodehost"
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Connected reports whether the node holds a live gateway connection.
func (h *Host) Connected() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conn != nil
}

// announce sends the start-up requests the real node host sends; failures
// (e.g. an unapproved surface) are logged, not fatal.
func (h *Host) announce(ctx context.Context, conn *ocproto.Conn) {
	go func() { _ = h.publishInventory(ctx, conn) }()
}

// publishInventory sends node.runnerInventory.update: at start-up, when
// worker capacity changes, and as the pairing watch's check.
func (h *Host) publishInventory(ctx context.Context, conn requester) error {
	rctx, cancel := context.WithTimeout(ctx, ocproto.DefaultRequestTimeout)
	defer cancel()
	return conn.Request(rctx, "node.runnerInventory.update", h.inventory(), nil)
}

func (h *Host) inventory() map[string]any {
	wh := map[string]any{"enabled": false}
	if h.workers != nil {
		total, avail := h.workers.Capacity()
		wh = map[string]any{"enabled": true, "capacity": map[string]int{"total": total, "available": avail}, "capturedExecPolicy": true}
	}
	return map[string]any{"protocolFeatures": []string{"node-worker-supervisor-v6"}, "workerHost": wh}
}

func (h *Host) inventoryChanged() {
	h.mu.Lock()
	conn := h.conn
	h.mu.Unlock()
	if conn != nil {
		go func() { _ = h.publishInventory(context.Background(), conn) }()
	}
}

func (h *Host) sendMemoryEvent(paths []string) {
	h.mu.Lock()
	conn := h.conn
	h.mu.Unlock()
	if conn == nil {
		return
	}
	b, _ := json.Marshal(map[string]any{"paths": paths})
	ctx, cancel := context.WithTimeout(context.Background(), ocproto.DefaultRequestTimeout)
	defer cancel()
	if err := conn.Request(ctx, "node.event", map[string]any{"event": MemoryEvent, "payloadJSON": string(b)}, nil); err != nil {
		h.log.Warn("memory change notification failed", "code", ocproto.DetailsCode(err))
	}
}

// invokeRequest is the node.invoke.request event payload (read leniently:
// it is the gateway's envelope, not command params).
type invokeRequest struct {
	ID             string          `json:"id"`
	NodeID         string          `json:"nodeId"`
	Command        string          `json:"command"`
	ParamsJSON     string          `json:"paramsJSON"`
	Params         json.RawMessage `json:"params"`
	TimeoutMs      int64           `json:"timeoutMs"`
	IdempotencyKey string          `json:"idempotencyKey"`
}

func (h *Host) onEvent(ev ocproto.Event) {
	switch ev.Event {
	case "node.pair.resolved":
		// as the real node host does: re-publish, which also tells whether
		// the approval reached this session
		select {
		case h.pairingKick <- struct{}{}:
		default:
		}
	case "node.invoke.request":
		var req invokeRequest
		if err := json.Unmarshal(ev.Payload, &req); err != nil || req.ID == "" {
			h.log.Warn("dropped malformed node.invoke.request")
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		if req.TimeoutMs > 0 {
			ctx, cancel = context.WithTimeout(context.Background(), time.Duration(req.TimeoutMs)*time.Millisecond)
		}
		h.mu.Lock()
		h.invokes[req.ID] = cancel
		conn := h.conn
		h.mu.Unlock()
		go h.serveInvoke(ctx, cancel, conn, req)
	case "node.invoke.cancel":
		var c struct {
			InvokeID string `json:"invokeId"`
		}
		if json.Unmarshal(ev.Payload, &c) == nil {
			h.mu.Lock()
			if cancel := h.invokes[c.InvokeID]; cancel != nil {
				cancel()
			}
			h.mu.Unlock()
		}
	}
}

func (h *Host) serveInvoke(ctx context.Context, cancel context.CancelFunc, conn *ocproto.Conn, req invokeRequest) {
	defer func() {
		cancel()
		h.mu.Lock()
		delete(h.invokes, req.ID)
		h.mu.Unlock()
	}()
	params := []byte(req.ParamsJSON)
	if len(params) == 0 {
		params = req.Params
	}
	result := map[string]any{"id": req.ID, "nodeId": h.id.DeviceID}
	out, err := h.Dispatch(ctx, req.Command, params)
	if err == nil {
		if s, merr := marshalResult(out); merr == nil {
			result["ok"] = true
			result["payloadJSON"] = s
		} else {
			err = cmdErr(CodeUnavailable, "result could not be encoded")
		}
	}
	if err != nil {
		code, msg := codeOf(err)
		result["ok"] = false
		result["error"] = map[string]any{"code": string(code), "message": msg}
	}
	if conn == nil {
		if h.onResult != nil {
			h.onResult(result)
		}
		return
	}
	rctx, rcancel := context.WithTimeout(context.Background(), ocproto.DefaultRequestTimeout)
	defer rcancel()
	if err := conn.Request(rctx, "node.invoke.result", result, nil); err != nil {
		h.log.Warn("node.invoke.result failed", "command", req.Command, "code", ocproto.DetailsCode(err))
	}
}

// Dispatch runs one command with its raw params. Unknown commands answer
// UNAVAILABLE "command not supported", as the real node host does.
func (h *Host) Dispatch(ctx context.Context, command string, params []byte) (any, error) {
	switch command {
	case "file.stat":
		return h.fileOp(ctx, params, h.fileStat)
	case "file.fetch":
		return h.fileOp(ctx, params, h.fileFetch)
	case "dir.list":
		return h.fileOp(ctx, params, h.dirList)
	case "file.write":
		return h.fileOp(ctx, params, h.fileWrite)
	case "system.run", "system.which":
		if h.cfg.FileOnly {
			return nil, cmdErr(CodeUnavailable, "command not supported")
		}
		if command == "system.run" {
			return h.systemRun(ctx, params)
		}
		return h.systemWhich(params)
	case "workspace.memory":
		return h.fileOp(ctx, params, h.workspaceMemory)
	}
	if h.workers != nil {
		switch command {
		case "worker.launch.v1":
			return h.workerLaunch(params)
		case "worker.cancel.v1":
			return h.workerCancel(ctx, params)
		case "worker.status.v1":
			return h.workerStatus(params)
		}
	}
	return nil, cmdErr(CodeUnavailable, "command not supported")
}
