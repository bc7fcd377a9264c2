package memory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

// The driver's Gateways serve the workspace routes (contract.RouteWorkspace…)
// from an in-memory workspace per Agent that outlives its revisions, with
// the semantics gatewayd gives them: the four documents only, a write names
// the version it replaces or forces, a stale version is a conflict carrying
// the current one. A revision that is not running has no Gateway to call.

type workspaces struct {
	mu    sync.Mutex
	docs  map[string]map[string]doc // agent → name → document
	down  map[string]bool           // agent → the Gateway answers unavailable
	calls int
}

type doc struct {
	content string
	mtime   int64
}

var _ compute.GatewayCaller = (*Driver)(nil)

func (d *Driver) ws() *workspaces {
	d.wsOnce.Do(func() { d.wsp = &workspaces{docs: map[string]map[string]doc{}, down: map[string]bool{}} })
	return d.wsp
}

// SetWorkspaceDown makes the Agent's Gateway answer its workspace routes
// with WORKSPACE_UNAVAILABLE (a disconnected node) while down is true.
func (d *Driver) SetWorkspaceDown(agentID string, down bool) {
	w := d.ws()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.down[agentID] = down
}

// WorkspaceDocument returns the Agent's document as the workspace holds it.
func (d *Driver) WorkspaceDocument(agentID, name string) (string, bool) {
	w := d.ws()
	w.mu.Lock()
	defer w.mu.Unlock()
	doc, ok := w.docs[agentID][name]
	return doc.content, ok
}

// WorkspaceCalls counts the workspace route calls that reached a Gateway.
func (d *Driver) WorkspaceCalls() int {
	w := d.ws()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls
}

func sum(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

func answer(status int, v any) (int, []byte, error) {
	b, _ := json.Marshal(v)
	return status, b, nil
}

// CallGateway implements compute.GatewayCaller.
func (d *Driver) CallGateway(_ context.Context, rev state.Revision, method, route string, body []byte) (int, []byte, error) {
	var running bool
	if err := d.record(rev.ID, "", func(r *Runtime, _ *string) { running = r.Running }); err != nil {
		return 0, nil, err
	}
	if !running {
		return 0, nil, fmt.Errorf("%w: revision %s is not running", compute.ErrGatewayUnavailable, rev.ID)
	}
	w := d.ws()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	if w.down[rev.AgentID] {
		return answer(http.StatusServiceUnavailable, contract.WorkspaceError{Code: string(codes.WorkspaceUnavailable)})
	}
	docs := w.docs[rev.AgentID]
	if docs == nil {
		docs = map[string]doc{}
		w.docs[rev.AgentID] = docs
	}
	file := func(name string, content bool) contract.WorkspaceFile {
		dc, ok := docs[name]
		if !ok {
			return contract.WorkspaceFile{Name: name, Missing: true}
		}
		f := contract.WorkspaceFile{Name: name, Size: int64(len(dc.content)), SHA256: sum(dc.content), UpdatedAtMs: dc.mtime}
		if content {
			f.Content = dc.content
		}
		return f
	}
	if route == contract.RouteWorkspaceFiles && method == http.MethodGet {
		out := contract.WorkspaceFiles{}
		for _, n := range contract.WorkspaceDocuments() {
			out.Files = append(out.Files, file(n, false))
		}
		return answer(http.StatusOK, out)
	}
	name, ok := strings.CutPrefix(route, contract.RouteWorkspaceFiles+"/")
	if !ok {
		return answer(http.StatusNotFound, contract.WorkspaceError{Code: string(codes.NotFound)})
	}
	if p := contract.DocumentNameProblem(name); p != "" {
		return answer(http.StatusBadRequest, contract.WorkspaceError{Code: p})
	}
	switch method {
	case http.MethodGet:
		return answer(http.StatusOK, file(name, true))
	case http.MethodPut:
		if !utf8.Valid(body) {
			return answer(http.StatusBadRequest, contract.WorkspaceError{Code: contract.ReasonDocumentNotUTF8})
		}
		var req contract.WorkspaceWrite
		if err := json.Unmarshal(body, &req); err != nil {
			return answer(http.StatusBadRequest, contract.WorkspaceError{Code: string(codes.InvalidRequest)})
		}
		if p, _ := contract.DocumentProblem(name, []byte(req.Content)); p != "" {
			return answer(http.StatusBadRequest, contract.WorkspaceError{Code: p})
		}
		cur := contract.VersionAbsent
		if dc, ok := docs[name]; ok {
			cur = sum(dc.content)
		}
		if !req.Force && req.Replaces != cur {
			return answer(http.StatusConflict, contract.WorkspaceError{Code: string(codes.WorkspaceConflict), Current: cur})
		}
		docs[name] = doc{content: req.Content, mtime: time.Now().UnixMilli()}
		return answer(http.StatusOK, file(name, false))
	}
	return answer(http.StatusMethodNotAllowed, contract.WorkspaceError{Code: string(codes.InvalidRequest)})
}
