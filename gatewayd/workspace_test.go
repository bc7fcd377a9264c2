package gatewayd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/ocproto"
)

// fakeGateway answers agents.files.* from a map (embedded) and node.invoke
// file.* like nodehost (dedicated, expectedSha256 = the replaced version),
// recording every call.
type fakeGateway struct {
	mu      sync.Mutex
	files   map[string]string
	calls   []string
	params  []map[string]any
	down    bool // every call fails as a dropped connection
	nodeOff bool // node.invoke answers the gateway's "node not connected"
	// pending is a node surface request awaiting approval: node.invoke is
	// refused as the real gateway refuses it until node.pair.approve
	pending []ocproto.PendingNode
	// offAfterApproval node.invoke calls after an approval answer "node not
	// connected", as the real gateway does until a node whose live session
	// the approval missed reconnects
	offAfterApproval int
	done             chan struct{}
}

func newFakeGateway() *fakeGateway {
	return &fakeGateway{files: map[string]string{"AGENTS.md": "# agents\n"}, done: make(chan struct{})}
}

func sum(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

func (f *fakeGateway) Done() <-chan struct{} { return f.done }
func (f *fakeGateway) Close() error          { return nil }

func (f *fakeGateway) RequestRaw(_ context.Context, method string, params any) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := params.(map[string]any)
	f.calls = append(f.calls, method)
	f.params = append(f.params, p)
	if f.down {
		return nil, ocproto.ErrClosed
	}
	switch method {
	case "agents.files.get":
		name := p["name"].(string)
		c, ok := f.files[name]
		if !ok {
			return json.Marshal(map[string]any{"file": map[string]any{"name": name, "missing": true}})
		}
		return json.Marshal(map[string]any{"file": map[string]any{"name": name, "size": len(c), "hash": sum(c),
			"content": c, "updatedAtMs": 7}})
	case "agents.files.set":
		name := p["name"].(string)
		if exp, ok := p["expectedHash"].(string); ok {
			cur, had := f.files[name]
			if !had || sum(cur) != exp {
				d := map[string]any{"type": "agent_file_conflict", "name": name}
				if had {
					d["currentHash"] = sum(cur)
				}
				return nil, &ocproto.Error{Method: method, Code: "INVALID_REQUEST", Message: "changed", Details: d}
			}
		}
		f.files[name] = p["content"].(string)
		return json.Marshal(map[string]any{"ok": true, "file": map[string]any{"hash": sum(f.files[name]), "updatedAtMs": 9}})
	case "node.pair.list":
		return json.Marshal(ocproto.NodePairList{Pending: f.pending})
	case "node.pair.approve":
		for i, pn := range f.pending {
			if pn.RequestID == p["requestId"] {
				f.pending = slices.Delete(f.pending, i, i+1)
				return json.Marshal(map[string]any{"ok": true})
			}
		}
		return nil, &ocproto.Error{Method: method, Code: "INVALID_REQUEST", Message: "unknown requestId"}
	case "node.invoke":
		if slices.ContainsFunc(f.pending, func(pn ocproto.PendingNode) bool { return pn.NodeID == p["nodeId"] }) {
			return nil, &ocproto.Error{Method: method, Code: "INVALID_REQUEST", Message: "node command not allowed: " +
				"the node's declared command surface is pending approval; run `openclaw nodes pending`"}
		}
		reconnecting := f.offAfterApproval > 0 && slices.Contains(f.calls, "node.pair.approve")
		if reconnecting {
			f.offAfterApproval--
		}
		if f.nodeOff || reconnecting {
			return nil, &ocproto.Error{Method: method, Code: "UNAVAILABLE", Message: "node not connected"}
		}
		np := p["params"].(map[string]any)
		name := strings.TrimPrefix(np["path"].(string), "/ws/")
		fail := func(code string) (json.RawMessage, error) {
			return nil, &ocproto.Error{Method: method, Code: "UNAVAILABLE", Message: code + ": refused",
				Details: map[string]any{"nodeError": map[string]any{"code": code}}}
		}
		var payload any
		switch p["command"] {
		case "file.fetch":
			c, ok := f.files[name]
			if !ok {
				return fail("PATH_NOT_FOUND")
			}
			payload = map[string]any{"ok": true, "size": len(c), "sha256": sum(c), "base64": base64.StdEncoding.EncodeToString([]byte(c))}
		case "file.stat":
			if _, ok := f.files[name]; !ok {
				return fail("PATH_NOT_FOUND")
			}
			payload = map[string]any{"ok": true, "mtimeMs": 11}
		case "file.write":
			if exp, ok := np["expectedSha256"].(string); ok && sum(f.files[name]) != exp {
				return fail("SHA256_MISMATCH")
			}
			b, _ := base64.StdEncoding.DecodeString(np["contentBase64"].(string))
			f.files[name] = string(b)
			payload = map[string]any{"ok": true, "size": len(b), "sha256": sum(string(b))}
		}
		pj, _ := json.Marshal(payload)
		return json.Marshal(map[string]any{"ok": true, "payloadJSON": string(pj)})
	}
	return nil, errors.New("unexpected method " + method)
}

func workspaceServer(t *testing.T, topo contract.Topology, node string, fg *fakeGateway) *httptest.Server {
	t.Helper()
	g := &Gatewayd{cfg: Config{Topology: topo, StatusToken: "tok", WorkspaceNodeID: node, NodeWorkspaceDir: "/ws"},
		log: slog.New(slog.DiscardHandler)}
	g.wsConn = &workspaceConn{dial: func(context.Context) (gatewayConn, error) {
		if fg.down {
			return nil, errors.New("dial refused")
		}
		return fg, nil
	}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+contract.RouteWorkspaceFiles, g.bearer(g.handleWorkspaceList))
	mux.HandleFunc("GET "+contract.RouteWorkspaceFile, g.bearer(g.handleWorkspaceGet))
	mux.HandleFunc("PUT "+contract.RouteWorkspaceFile, g.bearer(g.handleWorkspacePut))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func wsCall(t *testing.T, srv *httptest.Server, method, route string, body any, out any) int {
	t.Helper()
	var rd *bytes.Reader
	if raw, ok := body.([]byte); ok {
		rd = bytes.NewReader(raw)
	} else if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, srv.URL+route, rd)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if out != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
	return resp.StatusCode
}

func TestWorkspaceRoutesBothTopologies(t *testing.T) {
	for _, tc := range []struct {
		topo contract.Topology
		node string
	}{{contract.Embedded, ""}, {contract.DedicatedCodex, "dev1"}} {
		t.Run(string(tc.topo), func(t *testing.T) {
			fg := newFakeGateway()
			srv := workspaceServer(t, tc.topo, tc.node, fg)

			var list contract.WorkspaceFiles
			require.Equal(t, 200, wsCall(t, srv, "GET", contract.RouteWorkspaceFiles, nil, &list))
			require.Len(t, list.Files, 4)
			require.Equal(t, "AGENTS.md", list.Files[0].Name)
			require.Equal(t, sum("# agents\n"), list.Files[0].SHA256)
			require.Empty(t, list.Files[0].Content, "the list carries no content")
			require.True(t, list.Files[1].Missing)

			var f contract.WorkspaceFile
			require.Equal(t, 200, wsCall(t, srv, "GET", contract.WorkspaceFileRoute("AGENTS.md"), nil, &f))
			require.Equal(t, "# agents\n", f.Content)

			// a write naming the current version wins
			var w contract.WorkspaceFile
			require.Equal(t, 200, wsCall(t, srv, "PUT", contract.WorkspaceFileRoute("AGENTS.md"),
				contract.WorkspaceWrite{Content: "v2", Replaces: f.SHA256}, &w))
			require.Equal(t, sum("v2"), w.SHA256)
			// a write naming the old version is a conflict carrying the current one
			var we contract.WorkspaceError
			require.Equal(t, 409, wsCall(t, srv, "PUT", contract.WorkspaceFileRoute("AGENTS.md"),
				contract.WorkspaceWrite{Content: "v3", Replaces: f.SHA256}, &we))
			require.Equal(t, string(codes.WorkspaceConflict), we.Code)
			require.Equal(t, sum("v2"), we.Current)
			require.Equal(t, "v2", fg.files["AGENTS.md"], "nothing written on a conflict")
			// force: last write wins
			require.Equal(t, 200, wsCall(t, srv, "PUT", contract.WorkspaceFileRoute("AGENTS.md"),
				contract.WorkspaceWrite{Content: "v3", Replaces: f.SHA256, Force: true}, &w))
			require.Equal(t, "v3", fg.files["AGENTS.md"])
			// a new document: absent, then a conflict once it exists
			require.Equal(t, 200, wsCall(t, srv, "PUT", contract.WorkspaceFileRoute("SOUL.md"),
				contract.WorkspaceWrite{Content: "soul", Replaces: contract.VersionAbsent}, &w))
			require.Equal(t, 409, wsCall(t, srv, "PUT", contract.WorkspaceFileRoute("SOUL.md"),
				contract.WorkspaceWrite{Content: "soul2", Replaces: contract.VersionAbsent}, &we))
			require.Equal(t, sum("soul"), we.Current)
		})
	}
}

func TestWorkspaceRoutesRefuseBadInput(t *testing.T) {
	fg := newFakeGateway()
	srv := workspaceServer(t, contract.Embedded, "", fg)
	big := strings.Repeat("a", contract.MaxDocumentBytes+1)
	for _, tc := range []struct {
		name, route string
		body        any
		code        string
	}{
		{"other file", contract.WorkspaceFileRoute("TOOLS.md"), contract.WorkspaceWrite{Content: "x", Force: true}, contract.ReasonDocumentName},
		{"path", contract.RouteWorkspaceFiles + "/..%2FAGENTS.md", contract.WorkspaceWrite{Content: "x", Force: true}, contract.ReasonDocumentPath},
		{"oversized", contract.WorkspaceFileRoute("AGENTS.md"), contract.WorkspaceWrite{Content: big, Force: true}, contract.ReasonDocumentTooLarge},
		{"not utf-8", contract.WorkspaceFileRoute("AGENTS.md"), []byte("{\"content\":\"a\xff\xfe\",\"force\":true}"), contract.ReasonDocumentNotUTF8},
		{"no version", contract.WorkspaceFileRoute("AGENTS.md"), contract.WorkspaceWrite{Content: "x"}, contract.ReasonVersionRequired},
		{"unknown field", contract.WorkspaceFileRoute("AGENTS.md"), map[string]any{"content": "x", "force": true, "path": "/etc"}, string(codes.InvalidRequest)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fg.mu.Lock()
			n := len(fg.calls)
			fg.mu.Unlock()
			var we contract.WorkspaceError
			require.Equal(t, 400, wsCall(t, srv, "PUT", tc.route, tc.body, &we))
			require.Equal(t, tc.code, we.Code)
			fg.mu.Lock()
			require.Len(t, fg.calls, n, "a refused write reaches no gateway")
			fg.mu.Unlock()
		})
	}
	require.Equal(t, "# agents\n", fg.files["AGENTS.md"])
}

func TestWorkspaceUnavailableNeverStale(t *testing.T) {
	t.Run("gateway down", func(t *testing.T) {
		fg := newFakeGateway()
		fg.down = true
		srv := workspaceServer(t, contract.Embedded, "", fg)
		var we contract.WorkspaceError
		require.Equal(t, 503, wsCall(t, srv, "GET", contract.WorkspaceFileRoute("AGENTS.md"), nil, &we))
		require.Equal(t, string(codes.WorkspaceUnavailable), we.Code)
	})
	t.Run("node disconnected", func(t *testing.T) {
		fg := newFakeGateway()
		fg.nodeOff = true
		srv := workspaceServer(t, contract.DedicatedCodex, "dev1", fg)
		var we contract.WorkspaceError
		require.Equal(t, 503, wsCall(t, srv, "GET", contract.RouteWorkspaceFiles, nil, &we))
		require.Equal(t, string(codes.WorkspaceUnavailable), we.Code)
		require.NotContains(t, fg.calls, "agents.files.get", "a dedicated Gateway never reads a local copy")
	})
	t.Run("no pinned node", func(t *testing.T) {
		fg := newFakeGateway()
		srv := workspaceServer(t, contract.DedicatedCodex, "", fg)
		var we contract.WorkspaceError
		require.Equal(t, 503, wsCall(t, srv, "GET", contract.WorkspaceFileRoute("AGENTS.md"), nil, &we))
		require.Equal(t, string(codes.WorkspaceUnavailable), we.Code)
		require.Empty(t, fg.calls)
	})
	t.Run("no token", func(t *testing.T) {
		srv := workspaceServer(t, contract.Embedded, "", newFakeGateway())
		resp, err := http.Get(srv.URL + contract.WorkspaceFileRoute("AGENTS.md"))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 401, resp.StatusCode)
	})
}

func TestNodeInvokeParamsAreTheNodesShape(t *testing.T) {
	fg := newFakeGateway()
	srv := workspaceServer(t, contract.DedicatedCodex, "dev1", fg)
	require.Equal(t, 200, wsCall(t, srv, "PUT", contract.WorkspaceFileRoute("AGENTS.md"),
		contract.WorkspaceWrite{Content: "new", Replaces: sum("# agents\n")}, nil))
	var write map[string]any
	for i, c := range fg.calls {
		if c == "node.invoke" && fg.params[i]["command"] == "file.write" {
			write = fg.params[i]
		}
	}
	require.NotNil(t, write)
	require.Equal(t, "dev1", write["nodeId"])
	np := write["params"].(map[string]any)
	require.Equal(t, "/ws/AGENTS.md", np["path"])
	require.Equal(t, sum("# agents\n"), np["expectedSha256"], "the node checks the version the write replaces")
	require.Equal(t, false, np["followSymlinks"])
	for k := range np {
		require.Contains(t, []string{"path", "contentBase64", "expectedSha256", "followSymlinks"}, k,
			"only fields the node's closed params accept")
	}
}

// TestPinnedSurfaceApproval: a pinned node whose declared surface grew
// since its enrollment (a newer nodehost) is approved when everything it
// declares is oce's, and the write goes through; a surface declaring a
// command oce's nodehost never serves is left for a person.
func TestPinnedSurfaceApproval(t *testing.T) {
	for _, tc := range []struct {
		name     string
		commands []string
		want     int
		approved bool
		// node.invoke answers NOT_CONNECTED this many times after the
		// approval (the approval missed the live session; the node reconnects)
		offAfterApproval int
	}{
		{"oce surface", []string{"file.write", "file.fetch", "dir.list", "system.run"}, http.StatusOK, true, 0},
		{"oce surface, node reconnects", []string{"file.write", "system.run"}, http.StatusOK, true, 2},
		{"foreign command", []string{"file.write", "camera.snap"}, http.StatusServiceUnavailable, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fg := newFakeGateway()
			fg.offAfterApproval = tc.offAfterApproval
			fg.pending = []ocproto.PendingNode{{RequestID: "other", NodeID: "someone-else", Commands: []string{"x.y"}},
				{RequestID: "req-1", NodeID: "dev1", Commands: tc.commands}}
			srv := workspaceServer(t, contract.DedicatedCodex, "dev1", fg)
			var out contract.WorkspaceFile
			code := wsCall(t, srv, http.MethodPut, contract.WorkspaceFileRoute("AGENTS.md"),
				contract.WorkspaceWrite{Content: "# new\n", Force: true}, &out)
			require.Equal(t, tc.want, code)
			fg.mu.Lock()
			defer fg.mu.Unlock()
			require.Equal(t, tc.approved, slices.Contains(fg.calls, "node.pair.approve"))
			ids := []string{}
			for _, p := range fg.pending {
				ids = append(ids, p.RequestID)
			}
			if tc.approved {
				require.Equal(t, "# new\n", fg.files["AGENTS.md"])
				require.Zero(t, fg.offAfterApproval, "every NOT_CONNECTED answer was met with a retry")
				require.Equal(t, []string{"other"}, ids, "only the pinned node's request is approved")
			} else {
				require.Equal(t, "# agents\n", fg.files["AGENTS.md"], "nothing written")
				require.Equal(t, []string{"other", "req-1"}, ids)
			}
		})
	}
}
