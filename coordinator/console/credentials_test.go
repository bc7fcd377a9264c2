package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/console"
	"oce.dev/oce/coordinator/state"
)

// TestCredentialSourcesPage: the page lists a Namespace's sources with the
// reference Agents use, and its forms create, rotate and withdraw them; a
// value is write-only — never in any page, not even the form a refusal
// brings back — and is stored in the Namespace's own store.
func TestCredentialSourcesPage(t *testing.T) {
	f := newFixture(t, false)
	ns, _ := f.b.M.NamespaceByName("team")
	b := f.browser()
	csrf := b.login(adminToken)
	require.Contains(t, b.get("/console/ns/team").body, `href="/console/ns/team/credentials"`)
	require.Contains(t, b.get("/console/ns/team/new").body, `placeholder="credential:name#key"`)
	p := b.get("/console/ns/team/credentials")
	require.Equal(t, 200, p.status)
	require.Contains(t, p.body, `data-credential="k"`)
	require.Contains(t, p.body, "<code>credential:k</code>")
	require.Regexp(t, `<input id="cred-value" name="value" type="password"[^>]*>`, p.body)
	require.NotContains(t, p.body, "console-test-value")

	const secret = "sk-console-secret-value"
	p = b.post("/console/ns/team/credentials", url.Values{"csrf": {csrf}, "name": {"openai"}, "value": {secret}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	require.Equal(t, "/console/ns/team/credentials?notice=created", p.header.Get("Location"))
	v, version, ok := f.d.Credential(ns.ID, "openai")
	require.True(t, ok)
	require.Equal(t, int64(1), version)
	require.Equal(t, secret, string(v["value"]))
	p = b.get("/console/ns/team/credentials?notice=created")
	require.Contains(t, p.body, `data-credential="openai"`)
	require.NotContains(t, p.body, secret)

	// a refusal brings the form back with its name and key, never the value
	p = b.post("/console/ns/team/credentials", url.Values{"csrf": {csrf}, "name": {"openai"}, "key": {"k2"}, "value": {secret + "-2"}})
	require.Equal(t, http.StatusConflict, p.status)
	require.Contains(t, p.body, "RESOURCE_CONFLICT")
	require.Contains(t, p.body, `value="k2"`)
	require.NotContains(t, p.body, secret)

	p = b.post("/console/ns/team/credentials/openai/rotate", url.Values{"csrf": {csrf}, "value": {secret + "-rotated"}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	v, version, _ = f.d.Credential(ns.ID, "openai")
	require.Equal(t, int64(2), version)
	require.Equal(t, secret+"-rotated", string(v["value"]))
	require.NotContains(t, b.get("/console/ns/team/credentials").body, secret)

	p = b.post("/console/ns/team/credentials/openai/withdraw", url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	_, _, ok = f.d.Credential(ns.ID, "openai")
	require.False(t, ok)
	require.NotContains(t, b.get("/console/ns/team/credentials").body, `data-credential="openai"`)
}

// TestCredentialFormsFollowTheRoles: a viewer sees the sources but no form,
// and a forged POST is the API's 403, changing nothing but the audit; a
// reference into another Namespace is refused when an Agent is created.
func TestCredentialFormsFollowTheRoles(t *testing.T) {
	f := newFixture(t, false, func(c *console.Config) { c.Token = "" })
	vera := f.userToken("vera", "viewer")
	v := f.browser()
	csrf := v.login(vera)
	p := v.get("/console/ns/team/credentials")
	require.Equal(t, 200, p.status)
	require.Contains(t, p.body, `data-credential="k"`)
	require.NotContains(t, p.body, `id="credential-form"`)
	require.NotContains(t, p.body, `class="inline rotate"`)
	require.NotContains(t, p.body, `class="inline withdraw"`)
	before, n := f.digestWithoutAudit(), len(f.b.M.Audit(0, 0))
	p = v.post("/console/ns/team/credentials/k/withdraw", url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusForbidden, p.status)
	require.Equal(t, before, f.digestWithoutAudit())
	au := f.b.M.Audit(0, 0)[n:]
	require.Len(t, au, 1)
	require.Equal(t, state.AuditCredentialWithdraw, au[0].Action)
	require.Equal(t, "user:vera", au[0].Actor)

	f.api("POST", "/v1/namespaces", `{"name":"other"}`)
	f.api("POST", "/v1/namespaces/other/credentials", `{"name":"theirs","values":{"value":"sk-theirs"}}`)
	a := f.browser()
	csrf = a.login(adminToken)
	p = a.post("/console/ns/team/agents", url.Values{"csrf": {csrf}, "name": {"thief"}, "configuration": {"cfg"},
		"runtime": {"openclaw/embedded"}, "authMethod": {"api_key"}, "authRef": {"credential:other/theirs"}})
	require.Equal(t, http.StatusForbidden, p.status)
	require.True(t, strings.Contains(p.body, "another Namespace"), p.body)
	ns, _ := f.b.M.NamespaceByName("team")
	_, ok := f.b.M.AgentByName(ns.ID, "thief")
	require.False(t, ok)
}
