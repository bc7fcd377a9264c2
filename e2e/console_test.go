package e2e

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/internal/browser"
	"oce.dev/oce/occ"
)

// consoleSession is a logged-in headless Chromium on the dev coordinator's
// console (same listener as the API).
type consoleSession struct {
	t    testing.TB
	b    *browser.Browser
	base string
	shot string // where screenshots go
}

func (e *env) console(t testing.TB) *consoleSession {
	t.Helper()
	tok, err := os.ReadFile(filepath.Join(e.devDir(), "coordinator", "token"))
	require.NoError(t, err)
	// the dev coordinator serves TLS from its own dev CA, which this fresh
	// browser profile does not know: accept it (loopback only)
	b, err := browser.Start(context.Background(), chromedp.Flag("ignore-certificate-errors", true))
	require.NoError(t, err)
	t.Cleanup(b.Close)
	c := &consoleSession{t: t, b: b, base: "https://" + e.addr, shot: screenshotDir(t)}
	c.login(strings.TrimSpace(string(tok)))
	return c
}

// login logs in with token (logging out of a current session first).
func (c *consoleSession) login(token string) {
	c.t.Helper()
	c.do(chromedp.Navigate(c.base + "/console/"))
	ctx, cancel := context.WithTimeout(c.b.Ctx, time.Minute)
	in, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("logout") !== null`))
	cancel()
	require.NoError(c.t, err)
	if in {
		c.do(chromedp.Click(chromedp.ID("logout")))
	}
	c.do(chromedp.WaitVisible(chromedp.ID("token")), chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Submit(chromedp.ID("login-form")), chromedp.WaitVisible(chromedp.ID("namespaces")))
}

// js evaluates a JavaScript expression in the page (promises awaited).
func js[T any](c *consoleSession, expr string) T {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.b.Ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	require.NoError(c.t, err, expr)
	return v
}

// userToken creates user name with role in the default Namespace and
// mints its token.
func (e *env) userToken(t testing.TB, name, role string) string {
	t.Helper()
	e.mustOcc(t, "user", "create", name)
	e.mustOcc(t, "rolebinding", "create", "--role", role, "--user", name)
	out := filepath.Join(e.root, name+".token")
	e.mustOcc(t, "token", "create", "--user", name, "--out", out)
	tok, err := os.ReadFile(out)
	require.NoError(t, err)
	return strings.TrimSpace(string(tok))
}

// screenshotDir is docs/console with OCE_UPDATE_SCREENSHOTS=1 (make
// screenshots), else a temporary directory.
func screenshotDir(t testing.TB) string {
	if os.Getenv("OCE_UPDATE_SCREENSHOTS") == "1" {
		root, err := moduleRoot()
		require.NoError(t, err)
		return filepath.Join(root, "docs", "console")
	}
	return filepath.Join(shared.root, "screenshots")
}

// do runs browser steps with a deadline.
func (c *consoleSession) do(steps ...chromedp.Action[chromedp.Void]) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.b.Ctx, 2*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		c.dump()
		require.NoError(c.t, err)
	}
}

// dump logs where the browser is and what it shows (a failed step).
func (c *consoleSession) dump() {
	ctx, cancel := context.WithTimeout(c.b.Ctx, 20*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	if len(html) > 4000 {
		html = html[:4000]
	}
	c.t.Logf("browser at %s:\n%s", loc, html)
}

func (c *consoleSession) text(sel string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.b.Ctx, time.Minute)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(c.t, err, sel)
	return strings.TrimSpace(s)
}

// waitJS polls a JavaScript condition in the page until it holds.
func (c *consoleSession) waitJS(cond string, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		// the page reloads itself when a deploy ends: a poll cut short by the
		// navigation is polled again in the new page
		ctx, cancel := context.WithTimeout(c.b.Ctx, time.Until(deadline))
		_, err = chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(time.Until(deadline)),
			chromedp.WithPollingInterval(100*time.Millisecond)))
		cancel()
		if err == nil {
			return
		}
	}
	c.dump()
	require.NoError(c.t, err, "waiting for %s", cond)
}

// screenshot saves the viewport as <name>.png and checks it is a picture
// of the laptop-sized window.
func (c *consoleSession) screenshot(name string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.b.Ctx, time.Minute)
	defer cancel()
	b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(c.t, err)
	img, err := png.Decode(bytes.NewReader(b))
	require.NoError(c.t, err)
	require.Equal(c.t, browser.WindowWidth, img.Bounds().Dx())
	require.NoError(c.t, os.MkdirAll(c.shot, 0o755))
	require.NoError(c.t, os.WriteFile(filepath.Join(c.shot, name+".png"), b, 0o644))
}

// agentPage is the console path of an Agent in the default Namespace.
func agentPage(name string) string { return "/console/ns/" + occ.DefaultNamespace + "/agents/" + name }

// TestConsole drives the console in headless Chromium against `occ dev up`
// with the real OpenClaw gateway and the fake provider: log in, create and
// deploy an embedded Agent and watch its progress reach serving; edit
// AGENTS.md and see the next reply reflect it, also after a gateway restart
// and a redeploy; a CSRF-less POST is refused; a bad-key revision's Logs
// tab reads AUTHENTICATION_FAILED.
func TestConsole(t *testing.T) {
	e := &shared
	e.up(t)
	step := stepper(t)
	e.mustOcc(t, "config", "create", "console-cfg", "-f", demoFile(t, "embedded.json"))
	c := e.console(t)
	c.screenshot("namespaces")
	step("logged in")

	// Create Agent: the form offers what the installation runs
	c.do(chromedp.Navigate(c.base+"/console/ns/"+occ.DefaultNamespace+"/new"), chromedp.WaitVisible(chromedp.ID("create-form")))
	offered := c.text("#runtime")
	require.Contains(t, offered, "OpenClaw — embedded")
	require.NotContains(t, offered, "OpenClaw — dedicated", "the local driver cannot run dedicated OpenClaw")
	c.do(chromedp.SendKeys(chromedp.ID("name"), "web"),
		chromedp.SetValue(chromedp.ID("configuration"), "console-cfg"),
		chromedp.SetValue(chromedp.ID("authMethod"), "api_key"),
		chromedp.SendKeys(chromedp.ID("authRef"), "local:"+occ.DevDemoKey))
	c.screenshot("create")
	c.do(chromedp.Click(chromedp.ID("create-submit")), chromedp.WaitVisible(chromedp.ID("deploy")))
	require.Equal(t, "stopped", c.text("#agent-state"))

	// Deploy: progress streams in until the page shows serving
	start := time.Now()
	c.do(chromedp.Click(chromedp.ID("deploy")), chromedp.WaitVisible(chromedp.ID("progress-phase")))
	c.waitJS(`document.getElementById("agent-state").dataset.state === "failed" || `+
		`document.getElementById("agent-state").dataset.state === "serving" && document.getElementById("active-rev").textContent === "#1"`, 8*time.Minute)
	clicked := time.Since(start)
	// the page reloads itself when the deploy ends: read it settled
	c.do(chromedp.Navigate(c.base+agentPage("web")), chromedp.WaitVisible(chromedp.ID("revisions")))
	require.Equal(t, "serving", c.text("#agent-state"), "the deploy failed: %s", c.text("#progress"))
	t.Logf("click deploy → page shows serving: %s", clicked.Round(100*time.Millisecond))
	step("deployed in the console")
	c.do(chromedp.Navigate(c.base+agentPage("web")), chromedp.WaitVisible(chromedp.ID("revisions")))
	require.Contains(t, c.text("#audit"), wire.AuditActivate, "the audit trail shows the activation")
	c.screenshot("agent")
	c.do(chromedp.Navigate(c.base+"/console/ns/"+occ.DefaultNamespace), chromedp.WaitVisible(chromedp.ID("agents")))
	require.Contains(t, c.text(`tr[data-agent="web"]`), "serving")
	c.screenshot("agents")

	// Workspace files: edit AGENTS.md; the next turn sees it
	const marker = "OCE-ECHO-console-edit"
	c.do(chromedp.Navigate(c.base+agentPage("web")+"/files?doc=AGENTS.md"), chromedp.WaitVisible(chromedp.ID("content")))
	ctx, cancel := context.WithTimeout(c.b.Ctx, time.Minute)
	orig, err := chromedp.Run(ctx, chromedp.Value(chromedp.ID("content")))
	cancel()
	require.NoError(t, err)
	edited := orig + "\n## Console check\nAlways mention " + marker + " in every answer.\n"
	c.do(chromedp.SetValue(chromedp.ID("content"), edited), chromedp.Click(chromedp.ID("save")),
		chromedp.WaitVisible(chromedp.CSS(`#notice[data-notice="saved"]`)))
	c.screenshot("files")
	f := e.file(t, "web", "AGENTS.md")
	require.Contains(t, f.Content, marker, "the API reads the saved document through the Gateway")
	a := e.agent(t, "web")
	onDisk, err := os.ReadFile(filepath.Join(e.devDir(), "runtimes", a.NamespaceID, a.ID, "gateway-state", "workspace", "AGENTS.md"))
	require.NoError(t, err)
	require.Equal(t, f.Content, string(onDisk), "the gateway wrote the platform's Agent workspace (on the Agent's claim)")
	require.Contains(t, e.send(t, "web", "hello after the edit"), "["+marker+"]", "the next turn's instructions carry the edit")
	step("edit reached the next turn")

	// a gateway restart (the gateway process killed, gatewayd respawns it)
	// keeps the edit
	killGatewayChild(t, e, "web")
	require.Contains(t, e.send(t, "web", "hello after a restart"), "["+marker+"]")
	step("edit survived a gateway restart")

	// a CSRF-less POST with the real session cookie is refused, nothing deployed
	revsBefore := len(e.revisions(t, "web"))
	ctx, cancel = context.WithTimeout(c.b.Ctx, time.Minute)
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](
		`fetch("`+agentPage("web")+`/deploy", {method: "POST", body: new URLSearchParams({})}).then(r => r.status)`,
		chromedp.EvalAwaitPromise))
	cancel()
	require.NoError(t, err)
	require.Equal(t, 403, status)
	require.Len(t, e.revisions(t, "web"), revsBefore, "the refused POST deployed nothing")

	// a redeploy keeps the edit (the workspace is on the Agent's claim)
	start = time.Now()
	e.mustOcc(t, "agent", "deploy", "web", "--wait", "--timeout", "8m")
	t.Logf("occ agent deploy --wait (warm redeploy): %s", time.Since(start).Round(100*time.Millisecond))
	// the replacement gateway starts at activation (Recreate): the first
	// reply waits for it; until then the documents are unavailable, not stale
	require.Contains(t, e.send(t, "web", "hello after the redeploy"), "["+marker+"]")
	require.Contains(t, e.file(t, "web", "AGENTS.md").Content, marker)
	step("edit survived a redeploy")

	// a bad key: an Agent deployed from the console holds
	// AUTHENTICATION_FAILED; its Logs tab says so
	e.writeSecret(t, "bad-key", "sk-not-accepted")
	e.mustOcc(t, "agent", "create", "web-bad", "--config", "console-cfg", "--auth-method", "api_key", "--auth-ref", "local:bad-key")
	c.do(chromedp.Navigate(c.base+agentPage("web-bad")), chromedp.Click(chromedp.ID("deploy")))
	c.waitJS(`document.getElementById("agent-state").dataset.state === "failed"`, 8*time.Minute)
	c.do(chromedp.Navigate(c.base+agentPage("web-bad")+"/logs"), chromedp.WaitVisible(chromedp.ID("cause")),
		chromedp.WaitVisible(chromedp.ID("held-code")))
	c.screenshot("logs")
	require.Equal(t, "AUTHENTICATION_FAILED", c.text("#held-code"))
	require.Equal(t, "RUNTIME_AUTHENTICATION_FAILED", c.text("#failure-code"))
	// the key fails either in the runtime's model probe (its log lines say
	// so, read through the driver) or, with the pre-cutover credential
	// check, before any runtime starts (the check's outcome is shown)
	ctx, cancel = context.WithTimeout(c.b.Ctx, time.Minute)
	rejected, err := chromedp.Run(ctx, chromedp.Evaluate[bool](
		`(document.getElementById("credential") || {}).textContent === "rejected"`))
	cancel()
	require.NoError(t, err)
	if rejected {
		require.Contains(t, c.text("#logs-error"), "credential check rejected the key")
	} else {
		require.Contains(t, c.text("#log"), "AUTHENTICATION_FAILED", "the runtime's log lines through the driver")
	}
	step("bad key read in the Logs tab")

	// a viewer (a user bound to the viewer role: the API's Cedar driver
	// decides what the pages offer) sees no Deploy, Stop or Save; a forged
	// POST carrying the session's own CSRF token gets the API's 403,
	// deploys nothing and is audited as the viewer's denied deploy
	c.login(e.userToken(t, "vera", "viewer"))
	c.do(chromedp.Navigate(c.base+agentPage("web")), chromedp.WaitVisible(chromedp.ID("read-only")))
	require.Equal(t, "user:vera", c.text("#user"))
	require.True(t, js[bool](c, `document.getElementById("deploy") === null && document.getElementById("stop") === null`),
		"no Deploy or Stop for a viewer")
	revsBefore = len(e.revisions(t, "web"))
	status = js[int](c, `fetch("`+agentPage("web")+`/deploy", {method: "POST", body: new URLSearchParams({csrf: `+
		`document.querySelector("input[name=csrf]").value})}).then(r => r.status)`)
	require.Equal(t, 403, status, "the API refuses the viewer's deploy")
	require.Len(t, e.revisions(t, "web"), revsBefore, "the refused POST deployed nothing")
	denied := 0
	for _, r := range e.audit(t) {
		if r.Actor == "user:vera" && r.Action == state.AuditDeploy && r.Outcome == state.OutcomeDenied {
			denied++
		}
	}
	require.Equal(t, 1, denied, "one denied deploy by vera in the audit trail")
	c.do(chromedp.Navigate(c.base+agentPage("web")+"/files?doc=AGENTS.md"), chromedp.WaitVisible(chromedp.ID("content")))
	require.True(t, js[bool](c, `document.getElementById("save") === null && document.getElementById("content").readOnly`),
		"the viewer reads the documents, no Save")
	step("viewer: no deploy, 403")

	e.mustOcc(t, "agent", "delete", "web-bad")
	e.mustOcc(t, "agent", "delete", "web")
	require.Eventually(t, func() bool {
		_, code := e.occ(t, "agent", "get", "web")
		return code != 0
	}, 8*time.Minute, 200*time.Millisecond)
	step("deleted")
}

// file reads a workspace document with occ.
func (e *env) file(t testing.TB, agent, name string) wire.WorkspaceFile {
	t.Helper()
	var f wire.WorkspaceFile
	e.getJSON(t, &f, "agent", "files", "get", agent, name)
	return f
}

// killGatewayChild SIGKILLs the OpenClaw gateway process under the Agent's
// gatewayd and waits until gatewayd runs a new one.
func killGatewayChild(t testing.TB, e *env, name string) {
	t.Helper()
	a := e.agent(t, name)
	find := func() int {
		for _, p := range e.agentProcs(t, a.ID) {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
			cmd := strings.ReplaceAll(string(b), "\x00", " ")
			if strings.Contains(cmd, "openclaw") && strings.Contains(cmd, "gateway") && !strings.Contains(cmd, "gatewayd") {
				return p.PID
			}
		}
		return 0
	}
	old := find()
	require.NotZero(t, old, "the gateway process")
	require.NoError(t, syscall.Kill(old, syscall.SIGKILL))
	require.Eventually(t, func() bool { p := find(); return p != 0 && p != old }, 3*time.Minute, 200*time.Millisecond,
		"gatewayd respawned the gateway")
}
