package console

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/logging"
)

// LogTail is how many runtime log lines the Logs tab shows.
const LogTail = 200

type logLine struct {
	Text  string
	Level string // error, warn or ""
}

type logsView struct {
	agentBase
	Revision   *wire.RevisionSummary
	Container  string
	Containers []string
	Lines      []logLine
	LogsError  string
	// Raw shows the log as written instead of rendered records (?raw=1).
	Raw bool
}

// logsPage is the Logs tab: the selected revision's failure cause (closed
// codes: failure code, held code, causeKind, causeDetail) and its runtime's
// recent log lines read through the compute driver.
func (c *Console) logsPage(w http.ResponseWriter, r *http.Request, s *session) error {
	ctx, cancel := c.ctx(r)
	defer cancel()
	b, err := c.agentDetail(ctx, s, r, "logs")
	if err != nil {
		return err
	}
	v := logsView{agentBase: b, Container: "gateway", Containers: []string{"gateway"}}
	if b.Agent.ExecutionMode == wire.ModeDedicated {
		v.Containers = append(v.Containers, "harness")
	}
	if q := r.URL.Query().Get("container"); slices.Contains(v.Containers, q) {
		v.Container = q
	}
	v.Raw = r.URL.Query().Get("raw") == "1"

	want := r.URL.Query().Get("revision")
	for i := range b.Agent.Revisions {
		rv := &b.Agent.Revisions[i]
		if want == "" && i == 0 || want == strconv.FormatInt(rv.Number, 10) {
			v.Revision = rv
			break
		}
	}
	if v.Revision == nil && want != "" {
		return notFoundf("agent %s has no revision %s", b.Agent.Name, want)
	}
	if v.Revision != nil {
		rc, err := c.apiClient(s.token).Logs(ctx, b.Namespace, b.Agent.Name, client.LogOptions{Container: v.Container,
			Tail: LogTail, Revision: strconv.FormatInt(v.Revision.Number, 10)})
		if err != nil {
			var ce *client.Error
			if errors.As(err, &ce) && ce.Status == http.StatusUnauthorized {
				return errSessionGone
			}
			v.LogsError = "No runtime log is available for this revision."
			if v.Revision.Credential == "rejected" {
				v.LogsError = "No runtime started: the credential check rejected the key before cutover (its diagnostics are above)."
			}
			if errors.As(err, &ce) && ce.Status != http.StatusNotFound {
				v.LogsError = "The runtime log could not be read: " + string(ce.Code)
			}
		} else {
			v.Lines = readLines(rc, v.Raw)
			rc.Close()
		}
	}
	c.render(w, http.StatusOK, "logs", s, v)
	return nil
}

// readLines reads the log's lines, each JSON record rendered as TIME LEVEL
// message key=value… (logging.Pretty) unless raw; error and warn records
// are marked for colour either way.
func readLines(r io.Reader, raw bool) []logLine {
	var out []logLine
	sc := bufio.NewScanner(io.LimitReader(r, 4<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := logLine{Text: sc.Text()}
		if text, level, ok := logging.Pretty(sc.Bytes()); ok {
			if !raw {
				l.Text = text
			}
			switch level {
			case "error", "fatal":
				l.Level = "error"
			case "warn":
				l.Level = "warn"
			}
		}
		out = append(out, l)
	}
	return out
}

type filesView struct {
	agentBase
	Docs     []string
	Doc      string
	File     *wire.WorkspaceFile
	Content  string // what the editor shows
	Replaces string // the version the editor's content replaces
	CanWrite bool
	// CodexThreads marks a dedicated Codex Agent: Codex reads AGENTS.md
	// when a session's thread starts, so an edit reaches new sessions.
	CodexThreads bool
	// Notice kinds: saved, conflict, uncertain, unavailable, refused.
	Notice, NoticeText, Current string
}

// codexThreads reports whether the Agent's active revision runs Codex in a
// dedicated Harness.
func codexThreads(d wire.AgentDetail) bool {
	for _, r := range d.Revisions {
		if r.Number == d.ActiveRevision {
			return r.Harness.ID == "codex" && r.Mode == wire.ModeDedicated
		}
	}
	return false
}

// filesPage is the workspace files editor: the four documents read now
// through the Agent's Gateway. When the workspace is unavailable the page
// says so and shows no content (never a stale copy).
func (c *Console) filesPage(w http.ResponseWriter, r *http.Request, s *session) error {
	ctx, cancel := c.ctx(r)
	defer cancel()
	b, err := c.agentDetail(ctx, s, r, "files")
	if err != nil {
		return err
	}
	doc := r.URL.Query().Get("doc")
	if doc == "" {
		doc = wire.DocAgents
	}
	if !slices.Contains(wire.WorkspaceDocuments(), doc) {
		return badRequest(wire.ReasonDocumentName, "The editor shows only "+strings.Join(wire.WorkspaceDocuments(), ", ")+".")
	}
	v := filesView{agentBase: b, Docs: wire.WorkspaceDocuments(), Doc: doc, CodexThreads: codexThreads(b.Agent),
		CanWrite: c.can(ctx, s, ActionWriteFiles, Resource{Namespace: b.Namespace, Agent: b.Agent.Name})}
	if saved := r.URL.Query().Get("saved"); saved != "" {
		v.Notice, v.NoticeText = "saved", "Saved. Version "+short(saved)+"."
	}
	status := c.loadDoc(ctx, s, &v)
	c.render(w, status, "files", s, v)
	return nil
}

// loadDoc reads the document into v; an unavailable workspace is a notice.
func (c *Console) loadDoc(ctx context.Context, s *session, v *filesView) int {
	f, err := c.apiClient(s.token).File(ctx, v.Namespace, v.Agent.Name, v.Doc)
	if err != nil {
		v.File, v.Content, v.Replaces = nil, "", ""
		v.Notice, v.NoticeText = "unavailable", unavailableText(err)
		var ce *client.Error
		if errors.As(err, &ce) && ce.Status >= 400 {
			return ce.Status
		}
		return http.StatusBadGateway
	}
	v.File, v.Content, v.Replaces = &f, f.Content, f.SHA256
	if f.Missing {
		v.Replaces = wire.VersionAbsent
	}
	return http.StatusOK
}

func unavailableText(err error) string {
	var ce *client.Error
	if errors.As(err, &ce) && ce.Code == codes.WorkspaceUnavailable {
		reason, _ := ce.Details["reason"].(string)
		if reason == "NOT_SERVING" {
			return "Workspace unavailable: the Agent has no serving revision. Its documents are reached through its Gateway; deploy it to edit them."
		}
		return "Workspace unavailable: the Agent's Gateway or workspace node does not answer now. Nothing is shown rather than an old copy; reload later."
	}
	return "Workspace unavailable: " + err.Error()
}

// saveFile writes the editor's content naming the version it replaces.
// A conflict or an uncertain save re-shows the editor with the user's text,
// marked unsaved, and says what to do.
func (c *Console) saveFile(w http.ResponseWriter, r *http.Request, s *session) error {
	ns, name, doc := r.PathValue("ns"), r.PathValue("agent"), r.PathValue("name")
	if c.refuses(r.Context(), s, ActionWriteFiles, Resource{Namespace: ns, Agent: name}) {
		return forbidden("edit the workspace of agent " + name)
	}
	content := strings.ReplaceAll(r.PostForm.Get("content"), "\r\n", "\n") // browsers send CRLF
	req := wire.PutWorkspaceFile{Content: content, Replaces: r.PostForm.Get("replaces"), Force: r.PostForm.Get("force") == "1"}
	ctx, cancel := c.ctx(r)
	defer cancel()
	f, err := c.apiClient(s.token).PutFile(ctx, ns, name, doc, req)
	if err == nil {
		http.Redirect(w, r, agentPath(ns, name)+"/files?doc="+url.QueryEscape(doc)+"&saved="+url.QueryEscape(f.SHA256),
			http.StatusSeeOther)
		return nil
	}
	var ce *client.Error
	if errors.As(err, &ce) && (ce.Status == http.StatusUnauthorized || ce.Status == http.StatusForbidden) {
		return apiErr(err)
	}
	b, derr := c.agentDetail(ctx, s, r, "files")
	if derr != nil {
		return derr
	}
	v := filesView{agentBase: b, Docs: wire.WorkspaceDocuments(), Doc: doc, Content: content, Replaces: req.Replaces,
		CanWrite: true}
	status := http.StatusBadGateway
	switch {
	case errors.As(err, &ce) && ce.Status == http.StatusConflict:
		cur, _ := ce.Details["current"].(string)
		v.Notice, v.Current, status = "conflict", cur, http.StatusConflict
		v.NoticeText = "Not saved: " + doc + " changed since you opened it (now version " + short(cur) +
			"). Your text is below. Reload to see the current document, or save yours over it."
	case errors.As(err, &ce) && ce.Status == http.StatusBadRequest:
		reason, _ := ce.Details["reason"].(string)
		v.Notice, v.NoticeText, status = "refused", "Not saved ("+reason+"): "+ce.Message, http.StatusBadRequest
	default:
		v.Notice, v.NoticeText = "uncertain", "The save may or may not have happened ("+codeOf(err)+
			"). Reload before editing again; your text is below, unsaved."
		if errors.As(err, &ce) {
			status = ce.Status
		}
	}
	c.render(w, status, "files", s, v)
	return nil
}

func codeOf(err error) string {
	var ce *client.Error
	if errors.As(err, &ce) {
		return string(ce.Code)
	}
	return "no answer"
}

func short(v string) string {
	if len(v) > 12 {
		return v[:12]
	}
	return v
}
