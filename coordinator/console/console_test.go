package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/apitest"
	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/coordinator/console"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

const adminToken = "console-test-token-0123456789"

type fixture struct {
	t   *testing.T
	b   *apitest.Backend
	d   *memory.Driver
	srv *httptest.Server
}

// newFixture serves the API and the console on one test server, with the
// engine running over the memory driver, namespace "team" with credential
// source "k" (key "key"), Configuration "cfg" and Agent "bot".
func newFixture(t *testing.T, tls bool, mut ...func(*console.Config)) *fixture {
	t.Helper()
	b := apitest.New()
	var apiH http.Handler = api.New(api.Config{Token: adminToken, Metrics: prometheus.NewRegistry(), WithActor: apitest.WithActor}, b)
	apiH = viewerAPI(apiH)
	cfg := console.Config{API: apiH, Token: adminToken, ProgressInterval: 5 * time.Millisecond}
	for _, m := range mut {
		m(&cfg)
	}
	c, err := console.New(cfg)
	require.NoError(t, err)
	h := console.Mount(apiH, c)
	var srv *httptest.Server
	if tls {
		srv = httptest.NewTLSServer(h)
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	b.RunEngine(ctx)
	f := &fixture{t: t, b: b, d: b.Driver().(*memory.Driver), srv: srv}
	f.api("POST", "/v1/namespaces", `{"name":"team"}`)
	f.api("POST", "/v1/namespaces/team/credentials", `{"name":"k","values":{"key":"console-test-value"}}`)
	doc, _ := json.Marshal(map[string]any{"name": "cfg", "document": json.RawMessage(admission.ExampleEmbeddedAnthropic)})
	f.api("POST", "/v1/namespaces/team/configurations", string(doc))
	f.api("POST", "/v1/namespaces/team/agents", `{"name":"bot","configuration":"cfg","harnessAuth":{"method":"api_key","credentialKind":"secret","sourceRef":"secret://team/k#key"}}`)
	return f
}

// digest is the whole-state digest once the engine is quiescent (nothing
// more written in the background until a request or a changed observation):
// a comparison of two digests then compares the requests' effects only.
func (f *fixture) digest() string {
	f.t.Helper()
	f.quiesce()
	return f.b.M.Digest()
}

// digestWithoutAudit is digest without the audit log.
func (f *fixture) digestWithoutAudit() string {
	f.t.Helper()
	f.quiesce()
	return f.b.M.DigestWithoutAudit()
}

func (f *fixture) quiesce() {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), quiesceWait)
	defer cancel()
	require.NoError(f.t, f.b.WaitQuiescent(ctx), "the engine did not become quiescent")
}

// quiesceWait bounds a wait for quiescence (a few watcher rounds of 10 ms).
const quiesceWait = 30 * time.Second

func (f *fixture) api(method, path, body string) []byte {
	f.t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := f.srv.Client().Do(req)
	require.NoError(f.t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	require.Less(f.t, res.StatusCode, 300, "%s %s: %s", method, path, b)
	return b
}

// browser is a cookie-keeping client that does not follow redirects.
type browser struct {
	f *fixture
	c *http.Client
}

func (f *fixture) browser() *browser {
	jar, _ := cookiejar.New(nil)
	c := *f.srv.Client()
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{f: f, c: &c}
}

type page struct {
	status int
	body   string
	header http.Header
}

func (b *browser) get(path string) page {
	b.f.t.Helper()
	res, err := b.c.Get(b.f.srv.URL + path)
	require.NoError(b.f.t, err)
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return page{res.StatusCode, string(body), res.Header}
}

func (b *browser) post(path string, form url.Values, hdr ...string) page {
	b.f.t.Helper()
	req, _ := http.NewRequest("POST", b.f.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := b.c.Do(req)
	require.NoError(b.f.t, err)
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return page{res.StatusCode, string(body), res.Header}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, p page) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(p.body)
	require.NotNil(t, m, "no csrf field in %s", p.body)
	return m[1]
}

// login logs in with token and returns the session's CSRF token.
func (b *browser) login(token string) string {
	b.f.t.Helper()
	lp := b.get("/console/login")
	require.Equal(b.f.t, 200, lp.status)
	p := b.post("/console/login", url.Values{"csrf": {csrfOf(b.f.t, lp)}, "token": {token}, "next": {"/console/ns/team"}})
	require.Equal(b.f.t, http.StatusSeeOther, p.status, p.body)
	require.Equal(b.f.t, "/console/ns/team", p.header.Get("Location"))
	return csrfOf(b.f.t, b.get("/console/ns/team"))
}

func (f *fixture) agent() state.Agent {
	ns, _ := f.b.M.NamespaceByName("team")
	a, _ := f.b.M.AgentByName(ns.ID, "bot")
	return a
}

func TestLoginSessionCookieAndCSP(t *testing.T) {
	f := newFixture(t, true)
	b := f.browser()

	// no session: pages send the browser to the login form
	p := b.get("/console/ns/team")
	require.Equal(t, http.StatusSeeOther, p.status)
	require.True(t, strings.HasPrefix(p.header.Get("Location"), "/console/login"))

	lp := b.get("/console/login")
	require.Contains(t, lp.header.Get("Content-Security-Policy"), "script-src 'self'")
	require.Contains(t, lp.header.Get("Content-Security-Policy"), "default-src 'none'")
	require.Equal(t, "DENY", lp.header.Get("X-Frame-Options"))

	// the login form needs its CSRF pair; a wrong token is refused
	require.Equal(t, http.StatusForbidden, b.post("/console/login", url.Values{"token": {adminToken}}).status)
	lp = b.get("/console/login")
	wrong := b.post("/console/login", url.Values{"csrf": {csrfOf(t, lp)}, "token": {"nope"}})
	require.Equal(t, http.StatusUnauthorized, wrong.status)
	require.Contains(t, wrong.body, "not valid")

	lp = b.get("/console/login")
	res, err := b.c.PostForm(f.srv.URL+"/console/login", url.Values{"csrf": {csrfOf(t, lp)}, "token": {adminToken}})
	require.NoError(t, err)
	res.Body.Close()
	var sc *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "oce_console" && c.Value != "" {
			sc = c
		}
	}
	require.NotNil(t, sc, "a session cookie")
	require.True(t, sc.HttpOnly)
	require.True(t, sc.Secure, "Secure under TLS")
	require.Equal(t, http.SameSiteStrictMode, sc.SameSite)
	require.Equal(t, "/console", sc.Path)
	require.NotContains(t, sc.Value, adminToken)
	require.NotContains(t, res.Header.Get("Location"), adminToken, "no token in a URL")

	// every page: no token, no inline script or style, no event handlers
	for _, path := range []string{"/console/", "/console/ns/team", "/console/ns/team/agents/bot",
		"/console/ns/team/agents/bot/logs", "/console/ns/team/agents/bot/files", "/console/ns/team/new"} {
		p := b.get(path)
		require.Less(t, p.status, 600, path)
		require.NotContains(t, p.body, adminToken, path)
		require.NotRegexp(t, `<script(?:\s[^>]*)?>\s*[^<\s]`, p.body, "inline script in %s", path)
		require.NotRegexp(t, `\sstyle=|\son[a-z]+=|<style`, p.body, "inline style or handler in %s", path)
		require.Equal(t, "no-store", p.header.Get("Cache-Control"), path)
	}

	// logout ends the session server-side
	csrf := csrfOf(t, b.get("/console/"))
	require.Equal(t, http.StatusSeeOther, b.post("/console/logout", url.Values{"csrf": {csrf}}).status)
	require.Equal(t, http.StatusSeeOther, b.get("/console/").status)
}

func TestFormsNeedTheSessionsCSRFToken(t *testing.T) {
	f := newFixture(t, false)
	b := f.browser()
	csrf := b.login(adminToken)
	for _, tc := range []struct {
		name string
		form url.Values
		hdr  []string
	}{
		{"no token", url.Values{}, nil},
		{"wrong token", url.Values{"csrf": {"forged"}}, nil},
		{"other origin", url.Values{"csrf": {csrf}}, []string{"Origin", "http://evil.example"}},
		{"cross-site fetch", url.Values{"csrf": {csrf}}, []string{"Sec-Fetch-Site", "cross-site"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.digest()
			p := b.post("/console/ns/team/agents/bot/deploy", tc.form, tc.hdr...)
			require.Equal(t, http.StatusForbidden, p.status)
			require.Equal(t, before, f.digest(), "a refused form changed nothing")
		})
	}
	// a strict referrer policy's "null" origin falls back to fetch metadata
	before := f.digest()
	require.Equal(t, http.StatusForbidden, b.post("/console/ns/team/agents/bot/deploy", url.Values{"csrf": {csrf}},
		"Origin", "null", "Sec-Fetch-Site", "cross-site").status)
	require.Equal(t, before, f.digest())
	require.Equal(t, http.StatusSeeOther, b.post("/console/ns/team/agents/bot/deploy", url.Values{"csrf": {csrf}},
		"Origin", "null", "Sec-Fetch-Site", "same-origin").status, "the same form from this origin is accepted")

	// another session's token does not work either
	other := f.browser()
	other.login(adminToken)
	before = f.digest()
	require.Equal(t, http.StatusForbidden, other.post("/console/ns/team/agents/bot/deploy", url.Values{"csrf": {csrf}}).status)
	require.Equal(t, before, f.digest())
}

func TestDeployShowsProgressUntilServing(t *testing.T) {
	f := newFixture(t, false)
	b := f.browser()
	csrf := b.login(adminToken)
	ag := b.get("/console/ns/team/agents/bot")
	require.Contains(t, ag.body, `id="deploy"`)
	require.Contains(t, ag.body, `data-state="stopped"`)

	f.d.ReadyAfter("", 0)
	p := b.post("/console/ns/team/agents/bot/deploy", url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)

	// the event stream reports progress and ends with done once serving
	res, err := b.c.Get(f.srv.URL + "/console/ns/team/agents/bot/events")
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))
	sc := bufio.NewScanner(res.Body)
	var last string
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "event: ") {
			last = strings.TrimPrefix(sc.Text(), "event: ")
		}
		if last == "done" && strings.HasPrefix(sc.Text(), "data: ") {
			require.Contains(t, sc.Text(), `"state":"serving"`)
			break
		}
	}
	require.Equal(t, "done", last)
	ag = b.get("/console/ns/team/agents/bot")
	require.Contains(t, ag.body, `data-state="serving"`)
	require.Contains(t, ag.body, `openclaw.agents.lifecycle.activate`, "the audit trail")
	list := b.get("/console/ns/team")
	require.Regexp(t, `data-agent="bot"[\s\S]*data-state="serving"[\s\S]*#1`, list.body)
}

const viewerToken = "viewer-token-abcdefghijklmnop"

// viewerAPI stands in for the identities of issue 17 in front of the
// single-token API: the viewer's token may read (GET) and is refused
// anything else with 403 FORBIDDEN.
func viewerAPI(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+viewerToken {
			if r.Method != http.MethodGet {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				_, _ = io.WriteString(w, `{"error":{"code":"FORBIDDEN","message":"viewer may not"}}`)
				return
			}
			r.Header.Set("Authorization", "Bearer "+adminToken)
		}
		h.ServeHTTP(w, r)
	})
}

func TestViewerSeesNoDeployButtonAndIsRefused(t *testing.T) {
	f := newFixture(t, false, func(c *console.Config) {
		c.Authenticator = console.AuthenticatorFunc(func(_ context.Context, tok string) (console.Principal, error) {
			switch tok {
			case adminToken:
				return console.Principal{Name: "admin"}, nil
			case viewerToken:
				return console.Principal{Name: "vera", Roles: []string{"viewer"}}, nil
			}
			return console.Principal{}, console.ErrBadToken
		})
		// the console's view hides deploy from vera; its stop button is
		// left to the API to refuse, as a stale page would be
		c.Authorizer = console.AuthorizerFunc(func(_ context.Context, p console.Principal, a console.Action, _ console.Resource) bool {
			return p.Name != "vera" || a == console.ActionStop
		})
	})
	b := f.browser()
	csrf := b.login(viewerToken)
	ag := b.get("/console/ns/team/agents/bot")
	require.Equal(t, 200, ag.status)
	require.NotContains(t, ag.body, `id="deploy"`)
	require.Contains(t, ag.body, `id="stop"`)
	require.NotContains(t, b.get("/console/ns/team").body, `id="create-agent"`)
	before := f.digest()
	p := b.post("/console/ns/team/agents/bot/deploy", url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusForbidden, p.status)
	require.Contains(t, p.body, "You may not deploy agent bot")
	require.Equal(t, before, f.digest())
	require.Equal(t, http.StatusForbidden, b.get("/console/ns/team/new").status)
	// the API refuses what the page offered: 403 with its code, nothing changed
	p = b.post("/console/ns/team/agents/bot/stop", url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusForbidden, p.status)
	require.Contains(t, p.body, `id="error-code">FORBIDDEN<`)
	require.Equal(t, before, f.digest())
}

func TestWorkspaceEditorSavesConflictsAndNeverShowsStale(t *testing.T) {
	f := newFixture(t, false)
	b := f.browser()
	csrf := b.login(adminToken)
	// not serving: the editor says the workspace is unavailable
	p := b.get("/console/ns/team/agents/bot/files")
	require.Equal(t, http.StatusServiceUnavailable, p.status)
	require.Contains(t, p.body, `data-notice="unavailable"`)
	require.NotContains(t, p.body, `id="content"`)

	f.api("POST", "/v1/namespaces/team/agents/bot/deploy", "")
	require.Eventually(t, func() bool { return f.agent().ActiveRevisionID != "" }, 10*time.Second, 5*time.Millisecond)
	p = b.get("/console/ns/team/agents/bot/files?doc=AGENTS.md")
	require.Equal(t, 200, p.status)
	m := regexp.MustCompile(`name="replaces" value="([^"]*)"`).FindStringSubmatch(p.body)
	require.Equal(t, "absent", m[1])

	// save: markup in a document is escaped when shown
	doc := "# Rules\r\n<script>alert(1)</script>\r\n"
	p = b.post("/console/ns/team/agents/bot/files/AGENTS.md", url.Values{"csrf": {csrf}, "replaces": {"absent"}, "content": {doc}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	got, _ := f.d.WorkspaceDocument(f.agent().ID, "AGENTS.md")
	require.Equal(t, "# Rules\n<script>alert(1)</script>\n", got, "saved with the browser's CRLF normalized")
	p = b.get(p.header.Get("Location"))
	require.Contains(t, p.body, `data-notice="saved"`)
	require.Contains(t, p.body, "&lt;script&gt;alert(1)&lt;/script&gt;")
	require.NotContains(t, p.body, "<script>alert(1)")
	v1 := regexp.MustCompile(`name="replaces" value="([^"]*)"`).FindStringSubmatch(p.body)[1]

	// someone else saves; saving the stale text is a conflict that keeps it
	f.api("PUT", "/v1/namespaces/team/agents/bot/files/AGENTS.md", `{"content":"theirs","force":true}`)
	p = b.post("/console/ns/team/agents/bot/files/AGENTS.md", url.Values{"csrf": {csrf}, "replaces": {v1}, "content": {"mine"}})
	require.Equal(t, http.StatusConflict, p.status)
	require.Contains(t, p.body, `data-notice="conflict"`)
	require.Contains(t, p.body, ">mine</textarea>")
	require.Contains(t, p.body, `id="save-anyway"`)
	require.Contains(t, p.body, `id="reload"`)
	got, _ = f.d.WorkspaceDocument(f.agent().ID, "AGENTS.md")
	require.Equal(t, "theirs", got)
	// save anyway: last write wins
	p = b.post("/console/ns/team/agents/bot/files/AGENTS.md", url.Values{"csrf": {csrf}, "replaces": {v1}, "content": {"mine"}, "force": {"1"}})
	require.Equal(t, http.StatusSeeOther, p.status)
	got, _ = f.d.WorkspaceDocument(f.agent().ID, "AGENTS.md")
	require.Equal(t, "mine", got)

	// the node disconnects: unavailable, no stale content; a save is uncertain
	f.d.SetWorkspaceDown(f.agent().ID, true)
	p = b.get("/console/ns/team/agents/bot/files?doc=AGENTS.md")
	require.Equal(t, http.StatusServiceUnavailable, p.status)
	require.NotContains(t, p.body, ">mine<")
	p = b.post("/console/ns/team/agents/bot/files/AGENTS.md", url.Values{"csrf": {csrf}, "replaces": {"x"}, "content": {"edit"}})
	require.Contains(t, p.body, `data-notice="uncertain"`)
	require.Contains(t, p.body, "Reload before editing again")

	// bad input is refused with its closed reason, nothing written
	f.d.SetWorkspaceDown(f.agent().ID, false)
	p = b.post("/console/ns/team/agents/bot/files/AGENTS.md", url.Values{"csrf": {csrf}, "force": {"1"},
		"content": {strings.Repeat("x", 512<<10+1)}})
	require.Equal(t, http.StatusBadRequest, p.status)
	require.Contains(t, p.body, "DOCUMENT_TOO_LARGE")
	require.Equal(t, http.StatusBadRequest, b.get("/console/ns/team/agents/bot/files?doc=TOOLS.md").status)
	got, _ = f.d.WorkspaceDocument(f.agent().ID, "AGENTS.md")
	require.Equal(t, "mine", got)
}

func TestCreateAgentOffersWhatTheInstallationRuns(t *testing.T) {
	f := newFixture(t, false)
	b := f.browser()
	csrf := b.login(adminToken)
	p := b.get("/console/ns/team/new")
	require.Contains(t, p.body, `value="openclaw/embedded"`)
	require.Contains(t, p.body, `value="codex/dedicated"`)
	require.NotContains(t, p.body, `value="openclaw/dedicated"`, "withheld without a qualifying SandboxDriver")
	require.NotContains(t, p.body, `id="banner-sandbox"`)

	// posting the withheld mode anyway is refused before any write
	before := f.digest()
	p = b.post("/console/ns/team/agents", url.Values{"csrf": {csrf}, "name": {"x"}, "configuration": {"cfg"},
		"runtime": {"openclaw/dedicated"}})
	require.Equal(t, http.StatusBadRequest, p.status)
	require.Equal(t, before, f.digest())

	// with the Sandbox driver qualifying, dedicated OpenClaw is offered;
	// while it is out, the banner says so
	_, err := f.b.Apply(state.CmdSetInstallation, state.SetInstallation{Installation: state.Installation{
		SandboxDriver: "openshell", NativeWorkerSupport: "pinned-runtime"}})
	require.NoError(t, err)
	require.Contains(t, b.get("/console/ns/team/new").body, `value="openclaw/dedicated"`)

	p = b.post("/console/ns/team/agents", url.Values{"csrf": {csrf}, "name": {"helper"}, "configuration": {"cfg"},
		"runtime": {"openclaw/embedded"}, "authMethod": {"api_key"}, "authKind": {"secret"}, "authRef": {"secret://team/k#key"}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	require.Equal(t, "/console/ns/team/agents/helper?notice=created", p.header.Get("Location"))
	// the API's own refusal is shown on the form
	p = b.post("/console/ns/team/agents", url.Values{"csrf": {csrf}, "name": {"helper"}, "configuration": {"cfg"},
		"runtime": {"openclaw/embedded"}})
	require.Equal(t, http.StatusConflict, p.status)
	require.Contains(t, p.body, "RESOURCE_CONFLICT")
}

func TestSandboxOutageBanner(t *testing.T) {
	f := newFixture(t, false)
	f.b.SetDriver(sandboxDown{f.d})
	b := f.browser()
	b.login(adminToken)
	require.Contains(t, b.get("/console/ns/team").body, `id="banner-sandbox"`)
	require.Contains(t, b.get("/console/ns/team/new").body, `id="banner-sandbox"`)
}

func TestLogsTabShowsTheHeldCode(t *testing.T) {
	f := newFixture(t, false)
	f.d.SetHook(memory.OpPrepare, func(_ context.Context, rev string) error {
		f.d.Hold(rev, codes.ModelProbeFailed, &codes.Cause{Kind: codes.CauseProcessExit, Detail: "exit-1"})
		return nil
	})
	f.api("POST", "/v1/namespaces/team/agents/bot/deploy", "")
	require.Eventually(t, func() bool {
		r, ok := f.b.M.LatestRevision(f.agent().ID)
		return ok && r.Status == state.RevisionFailed
	}, 10*time.Second, 5*time.Millisecond)
	b := f.browser()
	b.login(adminToken)
	p := b.get("/console/ns/team/agents/bot/logs")
	require.Equal(t, 200, p.status)
	require.Contains(t, p.body, `id="failure-code">RUNTIME_MODEL_PROBE_FAILED<`)
	require.Contains(t, p.body, `id="held-code">MODEL_PROBE_FAILED<`)
	require.Contains(t, p.body, `id="cause-kind">PROCESS_EXIT<`)
	require.Contains(t, p.body, `id="cause-detail">exit-1<`)
	require.Contains(t, p.body, "startup failure held code=MODEL_PROBE_FAILED", "the runtime's log records, rendered")
	require.NotContains(t, p.body, "&#34;msg&#34;", "no raw JSON by default")
	raw := b.get("/console/ns/team/agents/bot/logs?raw=1")
	require.Contains(t, raw.body, "{&#34;msg&#34;:&#34;startup failure held&#34;", "?raw=1 shows the log as written")
	require.Contains(t, raw.body, `id="raw" name="raw" value="1" checked`)
	require.Contains(t, b.get("/console/ns/team").body, "MODEL_PROBE_FAILED")
	require.Equal(t, http.StatusNotFound, b.get("/console/ns/team/agents/bot/logs?revision=9").status)
}

func TestStaticAssetsAreEmbedded(t *testing.T) {
	f := newFixture(t, false)
	b := f.browser()
	for _, n := range []string{"console.js", "console.css"} {
		p := b.get("/console/static/" + n)
		require.Equal(t, 200, p.status)
		want, err := console.Static(n)
		require.NoError(t, err)
		require.Equal(t, string(want), p.body)
	}
	js, _ := console.Static("console.js")
	require.NotContains(t, string(js), "innerHTML", "the script writes text only")
	require.NotContains(t, string(js), "eval(")
}

// sandboxDown reports a SandboxDriver outage.
type sandboxDown struct{ *memory.Driver }

func (sandboxDown) SandboxDriverAvailable() bool { return false }

// userToken creates user name bound to role in team and mints its token.
func (f *fixture) userToken(name, role string) string {
	f.t.Helper()
	f.api("POST", "/v1/users", `{"name":"`+name+`"}`)
	f.api("POST", "/v1/rolebindings", `{"role":"`+role+`","namespace":"team","subject":{"kind":"user","name":"`+name+`"}}`)
	var m struct{ Token string }
	require.NoError(f.t, json.Unmarshal([]byte(f.api("POST", "/v1/tokens", `{"user":"`+name+`"}`)), &m))
	return m.Token
}

// TestPagesOfferWhatTheIAMDriverAllows: wired as the coordinator wires it
// (no Authorizer: the API's Cedar driver decides, through GET …/access on
// the exact resources), a viewer sees no Create, Deploy, Stop or Save, and
// a forged POST gets the API's 403 page and is recorded as a denied
// attempt; a deployer sees Deploy and Stop but no Save; a Restriction on
// the deploy's admitted facts hides Deploy from the deployer too.
func TestPagesOfferWhatTheIAMDriverAllows(t *testing.T) {
	f := newFixture(t, false, func(c *console.Config) { c.Token = "" })
	vera, dan := f.userToken("vera", "viewer"), f.userToken("dan", "deployer")
	f.api("POST", "/v1/namespaces/team/agents/bot/deploy", "")
	require.Eventually(t, func() bool { return f.agent().ActiveRevisionID != "" }, 10*time.Second, 5*time.Millisecond)
	f.api("PUT", "/v1/namespaces/team/agents/bot/files/AGENTS.md", `{"content":"# ours\n","force":true}`)
	const agent = "/console/ns/team/agents/bot"

	v := f.browser()
	csrf := v.login(vera)
	p := v.get(agent)
	require.Equal(t, 200, p.status)
	require.NotContains(t, p.body, `id="deploy"`)
	require.NotContains(t, p.body, `id="stop"`)
	require.Contains(t, p.body, `id="read-only"`)
	require.NotContains(t, v.get("/console/ns/team").body, `id="create-agent"`)
	require.Equal(t, http.StatusForbidden, v.get("/console/ns/team/new").status)
	p = v.get(agent + "/files?doc=AGENTS.md")
	require.Equal(t, 200, p.status)
	require.Contains(t, p.body, "# ours")
	require.NotContains(t, p.body, `id="save"`)
	require.Regexp(t, `<textarea[^>]*readonly`, p.body)

	// forged POSTs (the session's own CSRF token): the API refuses them,
	// changes nothing and records each denied attempt
	before, n := f.digestWithoutAudit(), len(f.b.M.Audit(0, 0))
	p = v.post(agent+"/deploy", url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusForbidden, p.status)
	require.Contains(t, p.body, `id="error-code">FORBIDDEN<`)
	p = v.post(agent+"/files/AGENTS.md", url.Values{"csrf": {csrf}, "content": {"mine"}, "force": {"1"}})
	require.Equal(t, http.StatusForbidden, p.status)
	require.Contains(t, p.body, `id="error-code">FORBIDDEN<`)
	require.Equal(t, before, f.digestWithoutAudit(), "a refused POST changed nothing")
	doc, _ := f.d.WorkspaceDocument(f.agent().ID, "AGENTS.md")
	require.Equal(t, "# ours\n", doc)
	au := f.b.M.Audit(0, 0)[n:]
	require.Len(t, au, 2)
	for i, action := range []string{state.AuditDeploy, state.AuditWorkspaceWrite} {
		require.Equal(t, action, au[i].Action)
		require.Equal(t, state.OutcomeDenied, au[i].Outcome)
		require.Equal(t, "user:vera", au[i].Actor)
	}

	// the Agent's audit trail shows the denied write and the admin's write
	a := f.browser()
	a.login(adminToken)
	trail := a.get(agent).body
	require.Contains(t, trail, `data-action="oce.agents.workspace.write" data-outcome="denied"`)
	require.Contains(t, trail, `data-action="oce.agents.workspace.write" data-outcome="success"`)

	d := f.browser()
	csrf = d.login(dan)
	p = d.get(agent)
	require.Contains(t, p.body, `id="deploy"`)
	require.Contains(t, p.body, `id="stop"`)
	require.NotContains(t, d.get(agent+"/files?doc=AGENTS.md").body, `id="save"`, "editing documents updates the Agent: admins")

	// a Restriction on the deploy's admitted facts: no Deploy for dan, Stop stays
	f.api("PUT", "/v1/restrictions/no-openclaw-bot",
		`{"policy":"forbid (principal, action == Action::\"DeployAgent\", resource == Agent::\"team/bot\") when { context.harness == \"openclaw\" };"}`)
	p = d.get(agent)
	require.NotContains(t, p.body, `id="deploy"`)
	require.Contains(t, p.body, `id="stop"`)
	f.api("DELETE", "/v1/restrictions/no-openclaw-bot", "")
	require.Contains(t, d.get(agent).body, `id="deploy"`)
	p = d.post(agent+"/deploy", url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
}

// TestEditorSaysWhenCodexReadsAgentsMD: for a dedicated Codex Agent the
// AGENTS.md editor says an edit reaches new sessions (Codex reads it when
// a thread starts); an embedded Agent's editor does not.
func TestEditorSaysWhenCodexReadsAgentsMD(t *testing.T) {
	f := newFixture(t, false)
	doc, _ := json.Marshal(map[string]any{"name": "codex", "document": json.RawMessage(admission.ExampleDedicatedCodex)})
	f.api("POST", "/v1/namespaces/team/configurations", string(doc))
	f.api("POST", "/v1/namespaces/team/agents", `{"name":"coder","configuration":"codex","executionMode":"dedicated","harnessAuth":{"method":"api_key","credentialKind":"secret","sourceRef":"secret://team/k#key"}}`)
	for _, a := range []string{"bot", "coder"} {
		f.api("POST", "/v1/namespaces/team/agents/"+a+"/deploy", "")
	}
	ns, _ := f.b.M.NamespaceByName("team")
	require.Eventually(t, func() bool {
		for _, n := range []string{"bot", "coder"} {
			if a, _ := f.b.M.AgentByName(ns.ID, n); a.ActiveRevisionID == "" {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond)
	b := f.browser()
	b.login(adminToken)
	p := b.get("/console/ns/team/agents/coder/files?doc=AGENTS.md")
	require.Equal(t, 200, p.status, p.body)
	require.Contains(t, p.body, `id="codex-threads"`)
	require.NotContains(t, b.get("/console/ns/team/agents/coder/files?doc=SOUL.md").body, `id="codex-threads"`)
	require.NotContains(t, b.get("/console/ns/team/agents/bot/files?doc=AGENTS.md").body, `id="codex-threads"`)
}
