package occ_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/occ"
)

// The manifests of the apply tests: team-a exists already (with its
// credential source, whose value no manifest holds); team-b is new, so
// its Configuration and Agent are checked by the server when written.
const (
	namespacesYAML = `# the teams
apiVersion: oce.dev/v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: oce.dev/v1
kind: Namespace
metadata:
  name: team-b
`
	credentialYAML = `apiVersion: oce.dev/v1
kind: Credential
metadata: {name: anthropic, namespace: team-a}
`
	configYAML = `apiVersion: oce.dev/v1
kind: Configuration
metadata: {name: chat, namespace: team-a}
spec:
  document:
    agents:
      defaults:
        model: {primary: anthropic/claude-sonnet-4-6}
        maxConcurrent: 4
    gateway: {mode: local}
---
apiVersion: oce.dev/v1
kind: Configuration
metadata: {name: chat, namespace: team-b}
spec:
  document: {"agents": {"defaults": {"model": {"primary": "anthropic/claude-sonnet-4-6"}}}, "gateway": {"mode": "local"}}
`
	agentsYAML = `apiVersion: oce.dev/v1
kind: Agent
metadata: {name: coder, namespace: team-a}
spec:
  configuration: chat
  harnessAuth: {method: api_key, sourceRef: "credential:anthropic"}
  plugins: [web]
  rollback: {enabled: true}
  resources:
    gateway: {memoryLimit: 2Gi}
---
apiVersion: oce.dev/v1
kind: Agent
metadata: {name: coder, namespace: team-b}
spec:
  configuration: chat
  harnessAuth: {method: api_key, sourceRef: "credential:anthropic"}
---
apiVersion: oce.dev/v1
kind: RoleBinding
metadata: {name: alice-deploys, namespace: team-a}
spec:
  role: deployer
  subject: {kind: user, name: alice}
---
apiVersion: oce.dev/v1
kind: RoleBinding
metadata: {name: coder-views, namespace: team-b}
spec:
  role: viewer
  subject: {kind: servicePrincipal, name: coder}
`
)

// gitops writes the manifests into a directory and returns it.
func (h *harness) gitops(files map[string]string) string {
	h.t.Helper()
	dir := filepath.Join(h.dir, "gitops")
	require.NoError(h.t, os.MkdirAll(dir, 0o700))
	for name, content := range files {
		require.NoError(h.t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	return dir
}

func (h *harness) teamA() {
	h.t.Helper()
	h.ok("namespace", "create", "team-a")
	r := h.runIn([]byte("test-anthropic-value\n"), "-n", "team-a", "credential", "create", "anthropic")
	require.Equal(h.t, 0, r.code, "%s%s", r.stdout, r.stderr)
}

// writes counts what the coordinator recorded: proposals and audit records.
func (h *harness) writes() (proposals, audit int) {
	return h.b.Proposals(), len(h.b.M.Audit(0, 0))
}

// Applying a directory twice changes nothing the second time: every object
// is unchanged and no write is sent; diff then finds nothing.
func TestApplyTwiceChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.teamA()
	dir := h.gitops(map[string]string{"00-namespaces.yaml": namespacesYAML, "10-credential.yaml": credentialYAML,
		"20-config.yml": configYAML, "30-agents.yaml": agentsYAML, "README.md": "not a manifest"})

	out := h.ok("apply", "-f", dir)
	require.Equal(t, `namespace/team-a unchanged
namespace/team-b created
credential/team-a/anthropic unchanged
config/team-a/chat created
config/team-b/chat created
agent/team-a/coder created
agent/team-b/coder created
rolebinding/team-a/alice-deploys created
rolebinding/team-b/coder-views created
`, out)
	got := h.ok("-n", "team-a", "agent", "get", "coder", "-o", "json")
	require.Contains(t, got, `"plugins": [`)
	require.Contains(t, got, `"window": "5m0s"`)
	require.Contains(t, got, `"memoryLimit": "2Gi"`)
	require.Contains(t, h.ok("rolebinding", "list"), "servicePrincipal:team-b/coder")

	p, a := h.writes()
	out = h.ok("apply", "-f", dir)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		require.True(t, strings.HasSuffix(line, " unchanged"), line)
	}
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 9)
	p2, a2 := h.writes()
	require.Equal(t, p, p2, "the second apply proposed nothing")
	require.Equal(t, a, a2, "the second apply left no audit record")

	r := h.run("diff", "-f", dir)
	require.Equal(t, occ.DiffSame, r.code, "%s%s", r.stdout, r.stderr)
	require.Empty(t, r.stdout)
}

// diff shows a pending change exactly: one unified diff of the changed
// object, whose only changed lines are the changed field; apply then
// configures that object alone, and diff is quiet again.
func TestDiffShowsThePendingChange(t *testing.T) {
	h := newHarness(t)
	h.teamA()
	files := map[string]string{"ns.yaml": namespacesYAML, "cred.yaml": credentialYAML, "config.yaml": configYAML,
		"agents.yaml": agentsYAML}
	dir := h.gitops(files)
	h.ok("apply", "-f", dir)

	h.gitops(map[string]string{"config.yaml": strings.Replace(configYAML, "maxConcurrent: 4", "maxConcurrent: 8", 1),
		"agents.yaml": strings.Replace(agentsYAML, "plugins: [web]", "plugins: [web, search]", 1)})
	p, a := h.writes()
	r := h.run("diff", "-f", dir)
	require.Equal(t, occ.DiffChanged, r.code, "%s%s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "2 object(s) would change")
	var changed []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if (strings.HasPrefix(l, "-") || strings.HasPrefix(l, "+")) && !strings.HasPrefix(l, "---") && !strings.HasPrefix(l, "+++") {
			changed = append(changed, l)
		}
	}
	require.Equal(t, []string{"-      maxConcurrent: 4", "+      maxConcurrent: 8", "+- search"}, changed, r.stdout)
	require.Contains(t, r.stdout, "--- coordinator/config/team-a/chat\n+++ manifest/config/team-a/chat\n")
	require.Contains(t, r.stdout, "--- coordinator/agent/team-a/coder\n+++ manifest/agent/team-a/coder\n")
	p2, a2 := h.writes()
	require.Equal(t, []int{p, a}, []int{p2, a2}, "diff writes nothing")

	out := h.ok("apply", "-f", dir)
	require.Contains(t, out, "config/team-a/chat configured\n")
	require.Contains(t, out, "agent/team-a/coder configured\n")
	require.Contains(t, out, "config/team-b/chat unchanged\n")
	require.Contains(t, h.ok("-n", "team-a", "agent", "get", "coder", "-o", "json"), `"search"`)
	r = h.run("diff", "-f", dir)
	require.Equal(t, occ.DiffSame, r.code, "%s%s", r.stdout, r.stderr)

	// A new object diffs against nothing.
	h.gitops(map[string]string{"new.yaml": "apiVersion: oce.dev/v1\nkind: Namespace\nmetadata: {name: team-c}\n"})
	r = h.run("diff", "-f", dir)
	require.Equal(t, occ.DiffChanged, r.code)
	require.Contains(t, r.stdout, "+++ manifest/namespace/team-c\n@@ -0,0 +1 @@\n+name: team-c\n")
}

// Bad manifests are refused before anything is sent: exit 2, a closed
// code, the file, the document and the line; nothing is applied, not even
// the good documents before the bad one.
func TestApplyRefusesBadManifests(t *testing.T) {
	const good = "apiVersion: oce.dev/v1\nkind: Namespace\nmetadata: {name: fine}\n---\n"
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"unknown kind", good + "apiVersion: oce.dev/v1\nkind: Gadget\nmetadata: {name: x}\n",
			[]string{"MANIFEST_KIND", "bad.yaml document 2 (line 5)", `kind "Gadget" is not one of Namespace, Credential`}},
		{"bad yaml", good + "apiVersion: oce.dev/v1\nkind: Namespace\nmetadata:\n  name: [x\n",
			[]string{"MANIFEST_SYNTAX", "bad.yaml document 2 (line 8): yaml: line 8:"}},
		{"missing name", good + "apiVersion: oce.dev/v1\nkind: Agent\nmetadata: {namespace: team}\nspec: {configuration: c}\n",
			[]string{"MANIFEST_MISSING", "document 2", "metadata.name is required"}},
		{"unknown field", good + "apiVersion: oce.dev/v1\nkind: Agent\nmetadata: {name: a}\nspec: {configuration: c, colour: red}\n",
			[]string{"MANIFEST_FIELD", "agent/default/a", `unknown field "colour"`}},
		{"nested unknown field", good + "apiVersion: oce.dev/v1\nkind: Agent\nmetadata: {name: a}\nspec: {configuration: c, harnessAuth: {method: api_key, ref: x}}\n",
			[]string{"MANIFEST_FIELD", `unknown field "ref"`}},
		{"wrong type", good + "apiVersion: oce.dev/v1\nkind: Agent\nmetadata: {name: a}\nspec: {configuration: c, plugins: web}\n",
			[]string{"MANIFEST_FIELD", "plugins"}},
		{"api version", good + "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n",
			[]string{"MANIFEST_API_VERSION", `apiVersion "v1" is not oce.dev/v1`}},
		{"no api version", "kind: Namespace\nmetadata: {name: x}\n", []string{"MANIFEST_MISSING", "apiVersion is required"}},
		{"missing spec field", good + "apiVersion: oce.dev/v1\nkind: Configuration\nmetadata: {name: c}\n",
			[]string{"MANIFEST_MISSING", "spec.document is required"}},
		{"duplicate", good + "apiVersion: oce.dev/v1\nkind: Namespace\nmetadata: {name: fine}\n",
			[]string{"MANIFEST_DUPLICATE", "namespace/fine", "the same object as"}},
		{"labels on a Credential", good + "apiVersion: oce.dev/v1\nkind: Credential\nmetadata: {name: x, labels: {team: a}}\n",
			[]string{"MANIFEST_FIELD", "labels"}},
		{"not a mapping", good + "- just\n- a list\n", []string{"MANIFEST_SYNTAX", "must be a mapping"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			p, a := h.writes()
			path := h.file("bad.yaml", tc.doc)
			for _, cmd := range []string{"apply", "diff"} {
				r := h.run(cmd, "-f", path)
				require.Equal(t, occ.ExitUsage, r.code, "%s: %s%s", cmd, r.stdout, r.stderr)
				require.Empty(t, r.stdout)
				for _, w := range tc.want {
					require.Contains(t, r.stderr, w)
				}
			}
			p2, a2 := h.writes()
			require.Equal(t, []int{p, a}, []int{p2, a2}, "nothing applied")
			require.Equal(t, 1, h.run("namespace", "get", "fine").code)
		})
	}
	h := newHarness(t)
	r := h.run("apply", "-f", filepath.Join(h.dir, "missing"))
	require.Equal(t, occ.ExitUsage, r.code)
	require.Contains(t, r.stderr, "MANIFEST_UNREADABLE")
	require.Equal(t, occ.ExitUsage, h.run("apply").code, "no -f")
}

// The server checks every change before any is made: one refused object
// (a document admission refuses, a credential value a manifest cannot
// hold) and nothing at all is applied.
func TestApplyValidatesBeforeChanging(t *testing.T) {
	h := newHarness(t)
	h.teamA()
	badDoc := strings.Replace(configYAML, "maxConcurrent: 4", "maxConcurrent: lots", 1)
	dir := h.gitops(map[string]string{"ns.yaml": namespacesYAML, "config.yaml": badDoc, "agents.yaml": agentsYAML})
	p, a := h.writes()
	r := h.run("apply", "-f", dir)
	require.Equal(t, occ.ExitErr, r.code, "%s%s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "config/team-a/chat")
	require.Contains(t, r.stderr, "INVALID_REQUEST")
	require.Contains(t, r.stderr, "nothing was changed")
	require.Empty(t, r.stdout)
	p2, a2 := h.writes()
	require.Equal(t, []int{p, a}, []int{p2, a2})
	require.Equal(t, 1, h.run("namespace", "get", "team-b").code, "the good namespace was not created either")

	// A credential source that does not exist cannot be made from a manifest.
	h.gitops(map[string]string{"config.yaml": configYAML, "cred.yaml": strings.Replace(credentialYAML, "anthropic", "openai", 1)})
	r = h.run("apply", "-f", dir)
	require.Equal(t, occ.ExitErr, r.code, "%s%s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "MANIFEST_UNSUPPORTED")
	require.Contains(t, r.stderr, "occ -n team-a credential create openai")
	p2, a2 = h.writes()
	require.Equal(t, []int{p, a}, []int{p2, a2})
}

// apply --dry-run=server says what it would do and changes nothing; an
// update that cannot be made (the Agent's service principal) is refused.
func TestApplyDryRunAndImmutableFields(t *testing.T) {
	h := newHarness(t)
	h.teamA()
	dir := h.gitops(map[string]string{"ns.yaml": namespacesYAML, "cred.yaml": credentialYAML, "config.yaml": configYAML,
		"agents.yaml": agentsYAML})
	p, a := h.writes()
	out := h.ok("apply", "-f", dir, "--dry-run=server")
	require.Contains(t, out, "namespace/team-b created (server dry run)\n")
	require.Contains(t, out, "config/team-a/chat created (server dry run)\n")
	require.Contains(t, out, "agent/team-b/coder created (server dry run; not checked: needs config/team-b/chat, which this apply creates)\n")
	p2, a2 := h.writes()
	require.Equal(t, []int{p, a}, []int{p2, a2})
	require.Equal(t, occ.ExitUsage, h.run("apply", "-f", dir, "--dry-run=client").code)

	h.ok("apply", "-f", dir)
	h.gitops(map[string]string{"agents.yaml": strings.Replace(agentsYAML, "  plugins: [web]\n", "  plugins: [web]\n  servicePrincipal: other\n", 1)})
	r := h.run("apply", "-f", dir)
	require.Equal(t, occ.ExitErr, r.code, "%s%s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "MANIFEST_UNSUPPORTED")
	require.Contains(t, r.stderr, "service principal never changes")
	// Removing fields restores their defaults: plugins, rollback, resources.
	h.gitops(map[string]string{"agents.yaml": strings.Replace(strings.Replace(agentsYAML,
		"  plugins: [web]\n  rollback: {enabled: true}\n  resources:\n    gateway: {memoryLimit: 2Gi}\n", "", 1),
		"coder, namespace: team-a}", "coder, namespace: team-a}", 1)})
	out = h.ok("apply", "-f", dir)
	require.Contains(t, out, "agent/team-a/coder configured\n")
	got := h.ok("-n", "team-a", "agent", "get", "coder", "-o", "json")
	require.NotContains(t, got, `"plugins"`)
	require.NotContains(t, got, `"resources"`)
	require.NotContains(t, got, `"enabled": true`)
	require.NotContains(t, h.ok("apply", "-f", dir), "configured", "and stays so")
}

// --dry-run=server on create, update and deploy: the answer of the write,
// and nothing changed.
func TestDryRunFlag(t *testing.T) {
	h := newHarness(t)
	h.seed()
	p, a := h.writes()
	r := h.run("namespace", "create", "lab", "--dry-run=server")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "lab")
	require.Contains(t, r.stderr, "server dry run: nothing was changed")
	r = h.run("-n", "team", "agent", "deploy", "bot", "--dry-run=server", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"number": 1`)
	h.ok("-n", "team", "agent", "update", "bot", "--plugin", "x", "--dry-run=server")
	h.ok("-n", "team", "config", "update", "cfg", "-f", h.file("o.json", strings.ReplaceAll(`{"gateway": {"mode": "local"},
 "agents": {"defaults": {"model": {"primary": "anthropic/claude-sonnet-4-6"}}}}`, "\n", "")), "--dry-run=server")
	r = h.run("-n", "team", "agent", "create", "bot2", "--config", "nope", "--dry-run=server")
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "NOT_FOUND", "the errors of the write")
	p2, a2 := h.writes()
	require.Equal(t, []int{p, a}, []int{p2, a2})
	require.Equal(t, occ.ExitUsage, h.run("-n", "team", "agent", "deploy", "bot", "--dry-run=server", "--wait").code)
	require.Equal(t, occ.ExitUsage, h.run("namespace", "create", "lab", "--dry-run=all").code)
	require.Equal(t, occ.ExitErr, h.run("namespace", "get", "lab").code, "nothing was created")
}

// The documented GitOps directory applies as the CI job applies it: with
// --deploy --wait the new Agent is deployed and serves; applying it again
// changes nothing and deploys nothing; a changed Configuration deploys the
// Agents of the manifests that use it.
func TestGitOpsExample(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.b.RunEngine(ctx)
	h.teamA()
	example := filepath.Join("..", "docs", "examples", "gitops")
	out := h.ok("apply", "-f", example, "--deploy", "--wait", "--timeout", "20s")
	require.Equal(t, `namespace/team-a unchanged
credential/team-a/anthropic unchanged
config/team-a/chat created
agent/team-a/coder created
rolebinding/team-a/alice-deploys created
rolebinding/team-a/oncall-views created
agent/team-a/coder deployed (revision 1)
`, out)
	require.Contains(t, h.ok("-n", "team-a", "agent", "get", "coder"), "serving")

	quiet := func() (int, int) {
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		defer wcancel()
		require.NoError(t, h.b.WaitQuiescent(wctx))
		return h.writes()
	}
	p, a := quiet()
	out = h.ok("apply", "-f", example, "--deploy", "--wait")
	require.NotContains(t, out, "deployed")
	require.NotContains(t, out, "created")
	p2, a2 := quiet()
	require.Equal(t, []int{p, a}, []int{p2, a2}, "the second apply wrote nothing")

	// A copy of the directory with a changed Configuration.
	dir := filepath.Join(h.dir, "copy")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	entries, err := os.ReadDir(example)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(example, e.Name()))
		require.NoError(t, err)
		b = []byte(strings.Replace(string(b), "maxConcurrent: 4", "maxConcurrent: 6", 1))
		require.NoError(t, os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600))
	}
	r := h.run("diff", "-f", dir)
	require.Equal(t, occ.DiffChanged, r.code)
	out = h.ok("apply", "-f", dir, "--deploy")
	require.Contains(t, out, "config/team-a/chat configured\nagent/team-a/coder unchanged\n")
	require.Contains(t, out, "agent/team-a/coder deployed (revision 2)\n")
	require.Equal(t, occ.ExitUsage, h.run("apply", "-f", dir, "--wait").code, "--wait needs --deploy")
}

// A Credential with spec.from is registered from that location, unchanged
// while the location stays, and registered again when it changes; a
// location the driver cannot read is refused in the validation pass.
func TestApplyRegistersCredentialSources(t *testing.T) {
	h := newHarness(t)
	h.ok("namespace", "create", "team-a")
	d := h.b.Driver().(*memory.Driver)
	d.SetLocation("memory:k1", map[string][]byte{"key": []byte("test-value-1")})
	d.SetLocation("memory:k2", map[string][]byte{"key": []byte("test-value-2")})
	ns, ok := h.b.M.NamespaceByName("team-a")
	require.True(t, ok)
	cred := func(from string) string {
		return "apiVersion: oce.dev/v1\nkind: Credential\nmetadata: {name: model, namespace: team-a}\nspec: {from: \"" + from + "\"}\n"
	}
	dir := h.gitops(map[string]string{"cred.yaml": cred("memory:k1")})
	require.Equal(t, "credential/team-a/model created\n", h.ok("apply", "-f", dir))
	require.Equal(t, "credential/team-a/model unchanged\n", h.ok("apply", "-f", dir))
	_, version, _ := d.Credential(ns.ID, "model")
	require.EqualValues(t, 1, version)

	h.gitops(map[string]string{"cred.yaml": cred("memory:k2")})
	require.Equal(t, "credential/team-a/model configured\n", h.ok("apply", "-f", dir))
	vals, version, _ := d.Credential(ns.ID, "model")
	require.EqualValues(t, 2, version)
	require.Equal(t, "test-value-2", string(vals["key"]))

	h.gitops(map[string]string{"cred.yaml": cred("memory:nowhere")})
	p, a := h.writes()
	r := h.run("apply", "-f", dir)
	require.Equal(t, occ.ExitErr, r.code, "%s%s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "credential/team-a/model")
	require.Contains(t, r.stderr, "NOT_FOUND")
	p2, a2 := h.writes()
	require.Equal(t, []int{p, a}, []int{p2, a2})
	_, version, _ = d.Credential(ns.ID, "model")
	require.EqualValues(t, 2, version, "the refused rotation wrote no value")
}

// Documents are numbered as a reader counts them: a leading --- or a
// document of comments only is not one.
func TestManifestDocumentNumbers(t *testing.T) {
	h := newHarness(t)
	path := h.file("m.yaml", "---\n# just a comment\n---\napiVersion: oce.dev/v1\nkind: Namespace\nmetadata: {name: a}\n---\n\n"+
		"apiVersion: oce.dev/v1\nkind: Nope\nmetadata: {name: b}\n")
	r := h.run("apply", "-f", path)
	require.Equal(t, occ.ExitUsage, r.code)
	require.Contains(t, r.stderr, "m.yaml document 2 (line 8): kind \"Nope\"")
}

// A Namespace's spec.quota is managed when present ({} clears it) and left
// alone when absent.
func TestApplyNamespaceQuota(t *testing.T) {
	h := newHarness(t)
	ns := func(quota string) string {
		return "apiVersion: oce.dev/v1\nkind: Namespace\nmetadata: {name: team-q}\n" + quota
	}
	dir := h.gitops(map[string]string{"ns.yaml": ns("spec: {quota: {agents: 2, memory: 8Gi}}\n")})
	require.Equal(t, "namespace/team-q created\n", h.ok("apply", "-f", dir))
	require.Contains(t, h.ok("namespace", "get", "team-q", "-o", "wide"), "agents=2,memory=8Gi")
	require.Equal(t, "namespace/team-q unchanged\n", h.ok("apply", "-f", dir))

	h.gitops(map[string]string{"ns.yaml": ns("spec: {quota: {agents: 3, memory: 8Gi}}\n")})
	r := h.run("diff", "-f", dir)
	require.Equal(t, occ.DiffChanged, r.code)
	require.Contains(t, r.stdout, "-  agents: 2\n+  agents: 3\n")
	require.Equal(t, "namespace/team-q configured\n", h.ok("apply", "-f", dir))

	h.gitops(map[string]string{"ns.yaml": ns("")})
	require.Equal(t, "namespace/team-q unchanged\n", h.ok("apply", "-f", dir), "an absent quota is not the manifest's")
	require.Contains(t, h.ok("namespace", "get", "team-q", "-o", "wide"), "agents=3")
	h.gitops(map[string]string{"ns.yaml": ns("spec: {quota: {}}\n")})
	require.Equal(t, "namespace/team-q configured\n", h.ok("apply", "-f", dir))
	require.NotContains(t, h.ok("namespace", "get", "team-q", "-o", "json"), "quota")

	h.gitops(map[string]string{"ns.yaml": ns("spec: {quota: {cpu: lots}}\n")})
	r = h.run("apply", "-f", dir)
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "INVALID_REQUEST", "the server's check, before anything changes")
}
