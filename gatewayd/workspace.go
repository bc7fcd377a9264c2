package gatewayd

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"regexp"
	"sync"
	"time"
	"unicode/utf8"

	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/ocproto"
	"oce.dev/oce/shared/status"
)

// Workspace document routes (contract.RouteWorkspaceFile): the coordinator
// reads and writes the Agent's four documents through this Gateway.
// Embedded, the gateway's own Agent workspace answers through its
// agents.files.* methods (sha256 expectedHash); dedicated, the enrolled,
// pinned workspace node's file commands do, invoked through the gateway so
// its command allow-list and file-transfer policy apply, then the node's own
// path policy and bindings. A dedicated Gateway never falls back to a local
// copy (docs/design/seed-003.md): without its node the documents are unavailable.

// WorkspaceRequestTimeout bounds one workspace route, gateway calls included.
const WorkspaceRequestTimeout = 30 * time.Second

// workspaceInvokeTimeoutMs is the node.invoke deadline of one file command.
const workspaceInvokeTimeoutMs = 20000

// mainAgentID is the implicit Agent of an oce gateway (no agents.list).
const mainAgentID = "main"

// Workspace failures the routes answer with (contract.WorkspaceError).
var (
	errWorkspaceUnavailable = errors.New("gatewayd: workspace unavailable")
	errWorkspaceConflict    = errors.New("gatewayd: document changed")
)

// workspaceError carries the route's closed code and, for a conflict, the
// current version.
type workspaceError struct {
	code    string
	status  int
	current string
	err     error
}

func (e *workspaceError) Error() string { return e.code + ": " + e.err.Error() }
func (e *workspaceError) Unwrap() error { return e.err }

func unavailable(format string, a ...any) error {
	return &workspaceError{code: string(codes.WorkspaceUnavailable), status: http.StatusServiceUnavailable,
		err: fmt.Errorf("%w: "+format, append([]any{errWorkspaceUnavailable}, a...)...)}
}

func conflictWith(current string) error {
	return &workspaceError{code: string(codes.WorkspaceConflict), status: http.StatusConflict, current: current,
		err: errWorkspaceConflict}
}

func refused(reason, msg string) error {
	return &workspaceError{code: reason, status: http.StatusBadRequest, err: errors.New(msg)}
}

// rpc is the gateway connection the workspace needs (an *ocproto.Operator).
type rpc interface {
	RequestRaw(ctx context.Context, method string, params any) (json.RawMessage, error)
}

// workspace serves the four documents over one gateway connection.
type workspace interface {
	get(ctx context.Context, c rpc, name string) (contract.WorkspaceFile, error)
	put(ctx context.Context, c rpc, name string, w contract.WorkspaceWrite) (contract.WorkspaceFile, error)
}

// gatewayWorkspace is the embedded Agent workspace through agents.files.*.
type gatewayWorkspace struct{}

// agentsFile is the file entry of agents.files.get/set.
type agentsFile struct {
	Missing     bool   `json:"missing"`
	Size        int64  `json:"size"`
	UpdatedAtMs int64  `json:"updatedAtMs"`
	Hash        string `json:"hash"`
	Content     string `json:"content"`
}

func (gatewayWorkspace) get(ctx context.Context, c rpc, name string) (contract.WorkspaceFile, error) {
	raw, err := c.RequestRaw(ctx, "agents.files.get", map[string]any{"agentId": mainAgentID, "name": name})
	if err != nil {
		return contract.WorkspaceFile{}, gatewayFailure(err)
	}
	var res struct {
		File agentsFile `json:"file"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return contract.WorkspaceFile{}, unavailable("agents.files.get: %v", err)
	}
	f := res.File
	if f.Missing {
		return contract.WorkspaceFile{Name: name, Missing: true}, nil
	}
	return contract.WorkspaceFile{Name: name, Size: f.Size, UpdatedAtMs: f.UpdatedAtMs, SHA256: f.Hash, Content: f.Content}, nil
}

func (g gatewayWorkspace) put(ctx context.Context, c rpc, name string, w contract.WorkspaceWrite) (contract.WorkspaceFile, error) {
	params := map[string]any{"agentId": mainAgentID, "name": name, "content": w.Content}
	switch {
	case w.Force:
	case w.Replaces == contract.VersionAbsent:
		// agents.files.set cannot expect absence; check, then write (the
		// window between the two is the gateway's own serialization).
		cur, err := g.get(ctx, c, name)
		if err != nil {
			return contract.WorkspaceFile{}, err
		}
		if !cur.Missing {
			return contract.WorkspaceFile{}, conflictWith(cur.SHA256)
		}
	default:
		params["expectedHash"] = w.Replaces
	}
	raw, err := c.RequestRaw(ctx, "agents.files.set", params)
	if err != nil {
		var e *ocproto.Error
		if errors.As(err, &e) && e.Details["type"] == "agent_file_conflict" {
			cur, _ := e.Details["currentHash"].(string)
			if cur == "" {
				cur = contract.VersionAbsent
			}
			return contract.WorkspaceFile{}, conflictWith(cur)
		}
		return contract.WorkspaceFile{}, gatewayFailure(err)
	}
	var res struct {
		File agentsFile `json:"file"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return contract.WorkspaceFile{}, unavailable("agents.files.set: %v", err)
	}
	return contract.WorkspaceFile{Name: name, Size: int64(len(w.Content)), UpdatedAtMs: res.File.UpdatedAtMs,
		SHA256: res.File.Hash}, nil
}

// nodeWorkspace is the dedicated Harness workspace through the pinned node.
type nodeWorkspace struct {
	nodeID string
	root   string // the workspace root on the node
}

func (n nodeWorkspace) invoke(ctx context.Context, c rpc, command string, params map[string]any) (json.RawMessage, error) {
	if n.nodeID == "" {
		return nil, unavailable("no workspace node is pinned for this Gateway")
	}
	params["path"] = path.Join(n.root, params["path"].(string))
	params["followSymlinks"] = false
	call := func() (json.RawMessage, error) {
		return c.RequestRaw(ctx, "node.invoke", map[string]any{"nodeId": n.nodeID, "command": command,
			"params": params, "timeoutMs": workspaceInvokeTimeoutMs, "idempotencyKey": "oce-ws-" + randomKey()})
	}
	raw, err := call()
	if err != nil && surfacePending(err) {
		// the pinned node declared more than its enrollment approved:
		// approve it if it is oce's surface, then try again (until the
		// node holds the approved surface)
		if ok, aerr := approvePinnedSurface(ctx, c, n.nodeID); aerr != nil {
			return nil, unavailable("node surface approval: %v", aerr)
		} else if ok {
			raw, err = afterApproval(ctx, call)
		}
	}
	if err != nil {
		return nil, err
	}
	var res struct {
		Payload     json.RawMessage `json:"payload"`
		PayloadJSON string          `json:"payloadJSON"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, unavailable("node.invoke: %v", err)
	}
	if len(res.Payload) == 0 || string(res.Payload) == "null" {
		res.Payload = json.RawMessage(res.PayloadJSON)
	}
	// A node may answer a refusal inside the payload (ok:false, code).
	var st struct {
		OK   *bool  `json:"ok"`
		Code string `json:"code"`
	}
	if json.Unmarshal(res.Payload, &st) == nil && st.OK != nil && !*st.OK {
		return nil, &ocproto.Error{Method: "node.invoke", Code: "UNAVAILABLE", Message: st.Code,
			Details: map[string]any{"nodeError": map[string]any{"code": st.Code}}}
	}
	return res.Payload, nil
}

func (n nodeWorkspace) get(ctx context.Context, c rpc, name string) (contract.WorkspaceFile, error) {
	raw, err := n.invoke(ctx, c, "file.fetch", map[string]any{"path": name, "maxBytes": contract.MaxDocumentBytes})
	if err != nil {
		switch nodeCode(err) {
		case "PATH_NOT_FOUND", "NOT_FOUND":
			return contract.WorkspaceFile{Name: name, Missing: true}, nil
		case "PAYLOAD_TOO_LARGE", "FILE_TOO_LARGE":
			return contract.WorkspaceFile{}, refused(contract.ReasonDocumentTooLarge, "the document on the node is over the limit")
		}
		return contract.WorkspaceFile{}, gatewayFailure(err)
	}
	var p struct {
		Size   int64  `json:"size"`
		Base64 string `json:"base64"`
		SHA256 string `json:"sha256"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return contract.WorkspaceFile{}, unavailable("file.fetch: %v", err)
	}
	data, err := base64.StdEncoding.DecodeString(p.Base64)
	if err != nil || int64(len(data)) != p.Size {
		return contract.WorkspaceFile{}, unavailable("file.fetch: malformed content")
	}
	if !utf8.Valid(data) {
		return contract.WorkspaceFile{}, refused(contract.ReasonDocumentNotUTF8, "the document on the node is not UTF-8 text")
	}
	f := contract.WorkspaceFile{Name: name, Size: p.Size, SHA256: p.SHA256, Content: string(data)}
	if st, err := n.stat(ctx, c, name); err == nil {
		f.UpdatedAtMs = st
	}
	return f, nil
}

func (n nodeWorkspace) stat(ctx context.Context, c rpc, name string) (int64, error) {
	raw, err := n.invoke(ctx, c, "file.stat", map[string]any{"path": name})
	if err != nil {
		return 0, err
	}
	var p struct {
		MtimeMs int64 `json:"mtimeMs"`
	}
	return p.MtimeMs, json.Unmarshal(raw, &p)
}

func (n nodeWorkspace) put(ctx context.Context, c rpc, name string, w contract.WorkspaceWrite) (contract.WorkspaceFile, error) {
	params := map[string]any{"path": name, "contentBase64": base64.StdEncoding.EncodeToString([]byte(w.Content))}
	if !w.Force {
		if w.Replaces == contract.VersionAbsent {
			cur, err := n.get(ctx, c, name)
			if err != nil {
				return contract.WorkspaceFile{}, err
			}
			if !cur.Missing {
				return contract.WorkspaceFile{}, conflictWith(cur.SHA256)
			}
		} else {
			// the node compares the file's current sha256 with the version
			// the write replaces, in the preflight and again in the write
			params["expectedSha256"] = w.Replaces
		}
	}
	raw, err := n.invoke(ctx, c, "file.write", params)
	if err != nil {
		switch nodeCode(err) {
		case "SHA256_MISMATCH", "BINDING_MISMATCH", "CANONICAL_PATH_MISMATCH":
			cur := contract.VersionAbsent
			if f, gerr := n.get(ctx, c, name); gerr == nil && !f.Missing {
				cur = f.SHA256
			}
			return contract.WorkspaceFile{}, conflictWith(cur)
		}
		return contract.WorkspaceFile{}, gatewayFailure(err)
	}
	var p struct {
		Size   int64  `json:"size"`
		SHA256 string `json:"sha256"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return contract.WorkspaceFile{}, unavailable("file.write: %v", err)
	}
	f := contract.WorkspaceFile{Name: name, Size: p.Size, SHA256: p.SHA256}
	if st, err := n.stat(ctx, c, name); err == nil {
		f.UpdatedAtMs = st
	}
	return f, nil
}

var upperCode = regexp.MustCompile(`\b[A-Z][A-Z0-9_]{2,63}\b`)

// nodeCode is the node's closed code in a failed node.invoke: the gateway
// forwards it as details.nodeError.code (or, from its file-transfer
// policy's preflight, at the head of the message).
func nodeCode(err error) string {
	var e *ocproto.Error
	if !errors.As(err, &e) {
		return ""
	}
	if ne, ok := e.Details["nodeError"].(map[string]any); ok {
		if c, ok := ne["code"].(string); ok && c != "" {
			return c
		}
	}
	for _, m := range upperCode.FindAllString(e.Message, -1) {
		switch m {
		case "PATH_NOT_FOUND", "NOT_FOUND", "SHA256_MISMATCH", "BINDING_MISMATCH", "CANONICAL_PATH_MISMATCH",
			"PAYLOAD_TOO_LARGE", "FILE_TOO_LARGE":
			return m
		}
	}
	return ""
}

// gatewayFailure maps a failed gateway call to the routes' codes: anything
// the gateway or node could not do is the workspace being unavailable.
func gatewayFailure(err error) error {
	var we *workspaceError
	if errors.As(err, &we) {
		return err
	}
	return unavailable("%s", ocproto.DetailsCode(err)+" "+errCode(err))
}

func errCode(err error) string {
	var e *ocproto.Error
	if errors.As(err, &e) {
		return e.Code
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "TIMEOUT"
	}
	return "GATEWAY_UNREACHABLE"
}

// gatewayConn is a live gateway connection (an *ocproto.Operator).
type gatewayConn interface {
	rpc
	Done() <-chan struct{}
	Close() error
}

// workspaceConn keeps one operator connection to the local gateway for the
// workspace routes, redialled when it dropped.
type workspaceConn struct {
	mu   sync.Mutex
	op   gatewayConn
	dial func(ctx context.Context) (gatewayConn, error)
}

func (w *workspaceConn) get(ctx context.Context) (gatewayConn, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.op != nil {
		select {
		case <-w.op.Done():
			w.op = nil
		default:
			return w.op, nil
		}
	}
	op, err := w.dial(ctx)
	if err != nil {
		return nil, err
	}
	w.op = op
	return op, nil
}

func (w *workspaceConn) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.op != nil {
		_ = w.op.Close()
		w.op = nil
	}
}

// workspaceBackend picks the topology's workspace.
func (g *Gatewayd) workspaceBackend() workspace {
	if g.cfg.Topology == contract.Embedded {
		return gatewayWorkspace{}
	}
	return nodeWorkspace{nodeID: g.cfg.WorkspaceNodeID, root: g.cfg.NodeWorkspaceDir}
}

func (g *Gatewayd) registerWorkspaceRoutes(st *status.Server) error {
	g.wsConn = &workspaceConn{dial: func(ctx context.Context) (gatewayConn, error) { return g.operator(ctx) }}
	for _, r := range []struct {
		pattern string
		h       http.HandlerFunc
	}{
		{"GET " + contract.RouteWorkspaceFiles, g.handleWorkspaceList},
		{"GET " + contract.RouteWorkspaceFile, g.handleWorkspaceGet},
		{"PUT " + contract.RouteWorkspaceFile, g.handleWorkspacePut},
	} {
		if err := st.HandleFunc(r.pattern, g.bearer(r.h), status.AuthNone); err != nil {
			return err
		}
	}
	return nil
}

// withGateway runs f over the cached operator connection; a connection that
// failed is dropped so the next call redials.
func (g *Gatewayd) withGateway(r *http.Request, f func(context.Context, rpc) error) error {
	ctx, cancel := context.WithTimeout(r.Context(), WorkspaceRequestTimeout)
	defer cancel()
	op, err := g.wsConn.get(ctx)
	if err != nil {
		return unavailable("the gateway does not accept operator connections: %s", errCode(err))
	}
	err = f(ctx, op)
	var oe *ocproto.Error
	if err != nil && !errors.As(err, &oe) {
		var we *workspaceError
		if !errors.As(err, &we) || we.code == string(codes.WorkspaceUnavailable) {
			g.wsConn.close()
		}
	}
	return err
}

func (g *Gatewayd) handleWorkspaceList(w http.ResponseWriter, r *http.Request) {
	out := contract.WorkspaceFiles{Files: []contract.WorkspaceFile{}}
	ws := g.workspaceBackend()
	err := g.withGateway(r, func(ctx context.Context, c rpc) error {
		for _, name := range contract.WorkspaceDocuments() {
			f, err := ws.get(ctx, c, name)
			if err != nil {
				return err
			}
			f.Content = ""
			out.Files = append(out.Files, f)
		}
		return nil
	})
	if err != nil {
		g.workspaceFailed(w, "list", err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (g *Gatewayd) handleWorkspaceGet(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if reason := contract.DocumentNameProblem(name); reason != "" {
		g.workspaceFailed(w, "get", refused(reason, "not an Agent document"))
		return
	}
	var f contract.WorkspaceFile
	err := g.withGateway(r, func(ctx context.Context, c rpc) (err error) {
		f, err = g.workspaceBackend().get(ctx, c, name)
		return err
	})
	if err != nil {
		g.workspaceFailed(w, "get", err)
		return
	}
	writeJSON(w, http.StatusOK, f)
}

func (g *Gatewayd) handleWorkspacePut(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	// JSON escaping can at most ~6× a document; anything longer is oversized
	body, err := io.ReadAll(io.LimitReader(r.Body, 6*contract.MaxDocumentBytes+1024))
	if err != nil {
		g.workspaceFailed(w, "put", refused(string(codes.InvalidRequest), "body unreadable"))
		return
	}
	// the JSON decoder would silently replace invalid UTF-8: refuse it first
	if !utf8.Valid(body) {
		g.workspaceFailed(w, "put", refused(contract.ReasonDocumentNotUTF8, "document is not valid UTF-8 text"))
		return
	}
	var req contract.WorkspaceWrite
	if err := ocproto.StrictUnmarshal(body, &req); err != nil {
		g.workspaceFailed(w, "put", refused(string(codes.InvalidRequest), "body is not a workspace write"))
		return
	}
	if reason, msg := contract.DocumentProblem(name, []byte(req.Content)); reason != "" {
		g.workspaceFailed(w, "put", refused(reason, msg))
		return
	}
	if !req.Force && req.Replaces == "" {
		g.workspaceFailed(w, "put", refused(contract.ReasonVersionRequired, "name the version the write replaces, or force"))
		return
	}
	var f contract.WorkspaceFile
	err = g.withGateway(r, func(ctx context.Context, c rpc) (err error) {
		f, err = g.workspaceBackend().put(ctx, c, name, req)
		return err
	})
	if err != nil {
		g.workspaceFailed(w, "put", err)
		return
	}
	g.log.Info("gatewayd: workspace document written", "document", name, "size", f.Size)
	writeJSON(w, http.StatusOK, f)
}

// workspaceFailed answers a closed WorkspaceError; the record names the
// operation and the code only (no path, no content).
func (g *Gatewayd) workspaceFailed(w http.ResponseWriter, op string, err error) {
	var we *workspaceError
	if !errors.As(err, &we) {
		we = unavailable("%s", errCode(err)).(*workspaceError)
	}
	g.log.Warn("gatewayd: workspace route failed", "op", op, "code", we.code)
	writeJSON(w, we.status, contract.WorkspaceError{Code: we.code, Message: we.err.Error(), Current: we.current})
}

// embeddedWorkspace is the workspace an embedded gateway renders.
func (g *Gatewayd) embeddedWorkspace() string {
	if g.cfg.Topology != contract.Embedded {
		return ""
	}
	return g.cfg.WorkspaceDir
}

func randomKey() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
