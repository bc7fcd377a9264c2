package api

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"unicode/utf8"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

// The Agent's workspace documents (docs/design/seed-003.md): the four documents of the
// workspace files editor, read and written through the Agent's serving
// Gateway (compute.GatewayCaller → the Gateway's workspace routes), which
// uses its own workspace (embedded) or the enrolled node's (dedicated).
// Nothing is cached here: when the Gateway or its node cannot answer the
// route says WORKSPACE_UNAVAILABLE, never an old copy. Bad input is refused
// before any Gateway is called.
//
// A write is a mutation like any other: once the caller is identified,
// every attempt appends one audit record (AuditWorkspaceWrite) with the
// actor, the Agent, the document and the outcome — written, refused, or
// denied. So writes run on the leader (a follower forwards them), where the
// record is appended; they are not keyed, the write itself names the
// version it replaces.

// workspaceRoutes registers the document routes under the Agent path.
func (s *server) workspaceRoutes(agent string) {
	s.read("GET "+agent+"/files", s.listFiles)
	s.read("GET "+agent+"/files/{name}", s.getFile)
	s.leaderOnly("PUT "+agent+"/files/{name}", s.putFile)
	// a path of several segments is not a document name
	s.read("GET "+agent+"/files/{path...}", func(w http.ResponseWriter, r *http.Request) error {
		if _, _, err := s.agentFor(r, iam.ViewAgent); err != nil {
			return err
		}
		return notDocument()
	})
	s.leaderOnly("PUT "+agent+"/files/{path...}", func(w http.ResponseWriter, r *http.Request) error {
		_, err := s.auditedWrite(r, r.PathValue("path"), func(state.Namespace, state.Agent) (contract.WorkspaceFile, string, error) {
			return contract.WorkspaceFile{}, "", notDocument()
		})
		return err
	})
}

func notDocument() error {
	return docInvalid(contract.ReasonDocumentPath, "a document is named, never a path: "+docList())
}

func workspaceUnavailable(reason, msg string) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: codes.WorkspaceUnavailable, Message: msg,
		Details: map[string]any{"reason": reason}}
}

func docInvalid(reason, msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: codes.InvalidRequest, Message: msg,
		Details: map[string]any{"reason": reason}}
}

// servingRevision is Agent a's active revision and a driver that can call
// its Gateway.
func (s *server) servingRevision(a state.Agent) (state.Revision, compute.GatewayCaller, error) {
	gc, ok := s.b.Driver().(compute.GatewayCaller)
	if !ok {
		return state.Revision{}, nil, workspaceUnavailable("NO_GATEWAY_ACCESS",
			"the compute driver cannot reach Agent Gateways")
	}
	if a.ActiveRevisionID == "" {
		return state.Revision{}, nil, workspaceUnavailable("NOT_SERVING",
			"agent "+a.Name+" has no serving revision: its workspace is reached through its Gateway")
	}
	rev, ok := s.b.Machine().Revision(a.ActiveRevisionID)
	if !ok {
		return state.Revision{}, nil, workspaceUnavailable("NOT_SERVING", "the active revision is not known here yet")
	}
	return rev, gc, nil
}

// callWorkspace sends one workspace route to Agent a's serving Gateway and
// maps its answer onto the API's closed codes; out receives a 200's body.
func (s *server) callWorkspace(r *http.Request, a state.Agent, method, route string, body []byte, out any) (state.Revision, error) {
	rev, gc, err := s.servingRevision(a)
	if err != nil {
		return rev, err
	}
	status, b, err := gc.CallGateway(r.Context(), rev, method, route, body)
	if err != nil {
		if errors.Is(err, compute.ErrGatewayUnavailable) {
			return rev, workspaceUnavailable("GATEWAY_UNAVAILABLE", "the Agent's Gateway does not answer")
		}
		return rev, workspaceUnavailable("GATEWAY_UNAVAILABLE", "the Agent's Gateway could not be called")
	}
	if status == http.StatusOK {
		if err := json.Unmarshal(b, out); err != nil {
			return rev, workspaceUnavailable("GATEWAY_ANSWER", "the Agent's Gateway answered malformed JSON")
		}
		return rev, nil
	}
	var we contract.WorkspaceError
	_ = json.Unmarshal(b, &we)
	switch {
	case status == http.StatusConflict && we.Code == string(codes.WorkspaceConflict):
		return rev, &Error{Status: http.StatusConflict, Code: codes.ResourceConflict,
			Message: "the document changed since the version this write replaces; reload it, or force the write",
			Details: map[string]any{"reason": wire.ReasonWorkspaceConflict, "current": we.Current}}
	case status == http.StatusBadRequest && we.Code != "":
		return rev, docInvalid(we.Code, "the Gateway refused the document: "+we.Code)
	case status == http.StatusUnauthorized:
		s.log.Error("gateway refused the status token", "revision", rev.ID)
	}
	// The Gateway's own account (its message names the failed gateway or
	// node call, never a path or content) says why to the operator.
	msg := "the Agent's workspace is unavailable now"
	if we.Message != "" {
		msg += ": " + we.Message
	}
	return rev, workspaceUnavailable("GATEWAY_UNAVAILABLE", msg)
}

func (s *server) listFiles(w http.ResponseWriter, r *http.Request) error {
	_, a, err := s.agentFor(r, iam.ViewAgent)
	if err != nil {
		return err
	}
	var got contract.WorkspaceFiles
	rev, err := s.callWorkspace(r, a, http.MethodGet, contract.RouteWorkspaceFiles, nil, &got)
	if err != nil {
		return err
	}
	out := wire.WorkspaceFiles{RevisionID: rev.ID, Files: []wire.WorkspaceFile{}}
	for _, f := range got.Files {
		if contract.IsWorkspaceDocument(f.Name) {
			wf := wireFile(f, rev.ID)
			wf.Content = ""
			out.Files = append(out.Files, wf)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) getFile(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if reason := contract.DocumentNameProblem(name); reason != "" {
		return docInvalid(reason, "the workspace editor serves only "+docList())
	}
	_, a, err := s.agentFor(r, iam.ViewAgent)
	if err != nil {
		return err
	}
	var f contract.WorkspaceFile
	rev, err := s.callWorkspace(r, a, http.MethodGet, contract.WorkspaceFileRoute(name), nil, &f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wireFile(f, rev.ID))
	return nil
}

func (s *server) putFile(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	f, err := s.auditedWrite(r, name, func(_ state.Namespace, a state.Agent) (contract.WorkspaceFile, string, error) {
		if reason := contract.DocumentNameProblem(name); reason != "" {
			return contract.WorkspaceFile{}, "", docInvalid(reason, "the workspace editor writes only "+docList())
		}
		// An escaped document is at most ~6× its size in JSON.
		data, err := readBody(w, r, 6*contract.MaxDocumentBytes+4096)
		if err != nil {
			return contract.WorkspaceFile{}, "", err
		}
		// encoding/json would silently replace invalid UTF-8: refuse it first.
		if !utf8.Valid(data) {
			return contract.WorkspaceFile{}, "", docInvalid(contract.ReasonDocumentNotUTF8, "the document is not valid UTF-8 text")
		}
		var req wire.PutWorkspaceFile
		if err := decodeStrict(data, &req); err != nil {
			return contract.WorkspaceFile{}, "", err
		}
		if reason, msg := contract.DocumentProblem(name, []byte(req.Content)); reason != "" {
			return contract.WorkspaceFile{}, "", docInvalid(reason, msg)
		}
		if !req.Force && req.Replaces == "" {
			return contract.WorkspaceFile{}, "", docInvalid(contract.ReasonVersionRequired,
				"name the version this write replaces (replaces: its sha256, or \""+contract.VersionAbsent+"\"), or force it")
		}
		body, _ := json.Marshal(contract.WorkspaceWrite{Content: req.Content, Replaces: req.Replaces, Force: req.Force})
		var f contract.WorkspaceFile
		rev, err := s.callWorkspace(r, a, http.MethodPut, contract.WorkspaceFileRoute(name), body, &f)
		return f, rev.ID, err
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, f)
	return nil
}

// auditedWrite authorizes a write of document name on the request's Agent
// (UpdateAgent: writing its documents changes what its next turn does),
// runs write, and appends the attempt's one audit record: the version
// written, or the refusal's code and reason; a denial is recorded by the
// authorization itself.
func (s *server) auditedWrite(r *http.Request, name string,
	write func(state.Namespace, state.Agent) (contract.WorkspaceFile, string, error)) (wire.WorkspaceFile, error) {
	ns, a, err := s.agent(r)
	if err != nil {
		return wire.WorkspaceFile{}, err
	}
	at := onAgent(ns, a)
	at.as, at.details = state.AuditWorkspaceWrite, map[string]string{"document": truncate(name, 64)}
	res := s.agentRes(ns, a)
	if err := s.authorize(r, iam.UpdateAgent, res, at, nil, false); err != nil {
		return wire.WorkspaceFile{}, err
	}
	f, revID, err := write(ns, a)
	rec := state.RecordAudit{Action: state.AuditWorkspaceWrite, Resource: res.String(), NamespaceID: ns.ID, AgentID: a.ID,
		Outcome: state.OutcomeSuccess, Details: maps.Clone(at.details)}
	if revID != "" {
		rec.Details["revision"] = revID
	}
	if err != nil {
		e := toError(err)
		rec.Outcome, rec.Details["code"] = state.OutcomeFailure, string(e.Code)
		if reason, _ := e.Details["reason"].(string); reason != "" {
			rec.Details["reason"] = truncate(reason, 64)
		}
	} else {
		rec.Details["sha256"] = f.SHA256
	}
	if _, perr := propose(s, r, state.CmdRecordAudit, rec); perr != nil {
		s.log.Warn("workspace write audit failed", "agent", a.ID, "document", name, "error", perr.Error())
	}
	f.Content = ""
	return wireFile(f, revID), err
}

func wireFile(f contract.WorkspaceFile, rev string) wire.WorkspaceFile {
	return wire.WorkspaceFile{Name: f.Name, Missing: f.Missing, Size: f.Size, UpdatedAtMs: f.UpdatedAtMs,
		SHA256: f.SHA256, Content: f.Content, RevisionID: rev}
}

func docList() string {
	out := ""
	for i, n := range contract.WorkspaceDocuments() {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}
