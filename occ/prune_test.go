package occ_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/occ"
)

// The manifests of the prune tests: team-a's objects carry team=a.
const (
	pruneNamespaceYAML = `apiVersion: oce.dev/v1
kind: Namespace
metadata: {name: team-a, labels: {team: a}}
`
	pruneConfigYAML = `apiVersion: oce.dev/v1
kind: Configuration
metadata: {name: chat, namespace: team-a, labels: {team: a}}
spec:
  document: {"agents": {"defaults": {"model": {"primary": "anthropic/claude-sonnet-4-6"}}}, "gateway": {"mode": "local"}}
`
	pruneOldConfigYAML = `apiVersion: oce.dev/v1
kind: Configuration
metadata: {name: old-chat, namespace: team-a, labels: {team: a}}
spec:
  document: {"agents": {"defaults": {"model": {"primary": "anthropic/claude-sonnet-4-6"}}}, "gateway": {"mode": "local"}}
`
	pruneAgentYAML = `apiVersion: oce.dev/v1
kind: Agent
metadata: {name: coder, namespace: team-a, labels: {team: a, tier: gold}}
spec:
  configuration: chat
  harnessAuth: {method: api_key, sourceRef: "credential:anthropic"}
`
	pruneOldAgentYAML = `apiVersion: oce.dev/v1
kind: Agent
metadata: {name: old, namespace: team-a, labels: {team: a}}
spec:
  configuration: old-chat
  harnessAuth: {method: api_key, sourceRef: "credential:anthropic"}
`
	pruneBindingYAML = `apiVersion: oce.dev/v1
kind: RoleBinding
metadata: {name: bob-views, namespace: team-a, labels: {team: a}}
spec:
  role: viewer
  subject: {kind: user, name: bob}
`
	// team-c is another set's Namespace whose Agent carries team=a too.
	pruneOtherYAML = `apiVersion: oce.dev/v1
kind: Namespace
metadata: {name: team-c, labels: {team: a}}
---
apiVersion: oce.dev/v1
kind: Configuration
metadata: {name: chat, namespace: team-c, labels: {team: a}}
spec:
  document: {"agents": {"defaults": {"model": {"primary": "anthropic/claude-sonnet-4-6"}}}, "gateway": {"mode": "local"}}
---
apiVersion: oce.dev/v1
kind: Agent
metadata: {name: stray, namespace: team-c, labels: {team: a}}
spec:
  configuration: chat
`
)

// pruneSet writes the named manifests into dir, removing the others.
func (h *harness) pruneSet(dir string, files map[string]string) {
	h.t.Helper()
	require.NoError(h.t, os.RemoveAll(dir))
	require.NoError(h.t, os.MkdirAll(dir, 0o700))
	for name, content := range files {
		require.NoError(h.t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
}

// pruneHarness has team-a (with its credential source), the full team-a
// set applied, an unlabelled Agent made by hand in team-a, and team-c
// applied from another directory; an engine completes deletions.
func pruneHarness(t *testing.T) (h *harness, dir string, all map[string]string) {
	h = newHarness(t)
	h.teamA()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go stopEngine(ctx, h.b, "")
	all = map[string]string{"00-ns.yaml": pruneNamespaceYAML, "10-chat.yaml": pruneConfigYAML, "11-old.yaml": pruneOldConfigYAML,
		"20-coder.yaml": pruneAgentYAML, "21-old.yaml": pruneOldAgentYAML, "30-bob.yaml": pruneBindingYAML}
	dir = filepath.Join(h.dir, "team-a")
	h.pruneSet(dir, all)
	h.ok("apply", "-f", dir)
	other := filepath.Join(h.dir, "team-c")
	h.pruneSet(other, map[string]string{"c.yaml": pruneOtherYAML})
	h.ok("apply", "-f", other)
	h.ok("-n", "team-a", "agent", "create", "manual", "--config", "old-chat")
	return h, dir, all
}

func without(m map[string]string, drop ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for _, d := range drop {
		delete(out, d)
	}
	return out
}

// Labels are applied, compared and shown: a second apply writes nothing, a
// label change is "configured" and writes only the labels.
func TestApplyLabels(t *testing.T) {
	h, dir, all := pruneHarness(t)
	p0, a0 := h.writes()
	out := h.ok("apply", "-f", dir)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		require.True(t, strings.HasSuffix(line, " unchanged"), "%q", line)
	}
	p1, a1 := h.writes()
	require.Equal(t, p0, p1, "a second apply sends no write")
	require.Equal(t, a0, a1, "and appends no audit record")
	require.Contains(t, h.ok("-n", "team-a", "agent", "get", "coder", "-o", "yaml"), "tier: gold")

	relabelled := strings.Replace(pruneAgentYAML, "tier: gold", "tier: silver", 1)
	h.pruneSet(dir, without(all))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "20-coder.yaml"), []byte(relabelled), 0o600))
	r := h.run("diff", "-f", dir)
	require.Equal(t, 1, r.code, "%s%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "-  tier: gold")
	require.Contains(t, r.stdout, "+  tier: silver")
	out = h.ok("apply", "-f", dir, "--deploy")
	require.Contains(t, out, "agent/team-a/coder configured")
	require.NotContains(t, out, "deployed", "a label is no input of a revision")
	p2, a2 := h.writes()
	require.Equal(t, p1+1, p2, "one write: the labels")
	require.Equal(t, a1+1, a2)
	require.Contains(t, h.ok("-n", "team-a", "agent", "get", "coder", "-o", "yaml"), "tier: silver")

	// A malformed label is refused by the server's check: nothing is written.
	bad := strings.Replace(pruneAgentYAML, "tier: gold", `tier: "not a value"`, 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "20-coder.yaml"), []byte(bad), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "22-new.yaml"), []byte(strings.Replace(bad, "name: coder", "name: newbie", 1)), 0o600))
	r = h.run("apply", "-f", dir)
	require.Equal(t, occ.ExitErr, r.code, "%s%s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "agent/team-a/coder")
	require.Contains(t, r.stderr, "agent/team-a/newbie")
	require.Contains(t, r.stderr, "INVALID_REQUEST")
	p3, a3 := h.writes()
	require.Equal(t, p2, p3, "nothing written")
	require.Equal(t, a2, a3)
}

func TestApplyPrune(t *testing.T) {
	h, dir, all := pruneHarness(t)
	// old, old-chat and bob's binding leave the set.
	h.pruneSet(dir, without(all, "11-old.yaml", "21-old.yaml", "30-bob.yaml"))

	t.Run("refused without -l", func(t *testing.T) {
		for _, args := range [][]string{
			{"apply", "-f", dir, "--prune"},
			{"apply", "-f", dir, "--prune", "-l", ""},
			{"apply", "-f", dir, "--prune", "-l", "=a"},
			{"apply", "-f", dir, "-l", "team=a"},
			{"apply", "-f", dir, "--prune-namespaces"},
		} {
			p0, a0 := h.writes()
			r := h.run(args...)
			require.Equal(t, occ.ExitUsage, r.code, "%v: %s%s", args, r.stdout, r.stderr)
			p1, a1 := h.writes()
			require.Equal(t, p0, p1, "%v changed nothing", args)
			require.Equal(t, a0, a1)
		}
	})

	t.Run("a bad selector is refused before any write", func(t *testing.T) {
		p0, _ := h.writes()
		r := h.run("apply", "-f", dir, "--prune", "-l", "team=a b")
		require.Equal(t, occ.ExitErr, r.code, "%s%s", r.stdout, r.stderr)
		require.Contains(t, r.stderr, "INVALID_REQUEST")
		p1, _ := h.writes()
		require.Equal(t, p0, p1)
	})

	t.Run("dry run", func(t *testing.T) {
		p0, a0 := h.writes()
		r := h.run("apply", "-f", dir, "--prune", "-l", "team=a", "--dry-run=server")
		require.Equal(t, occ.ExitErr, r.code, "%s%s", r.stdout, r.stderr)
		require.Contains(t, r.stdout, "rolebinding/team-a/viewer:user:bob pruned (dry run)")
		require.Contains(t, r.stdout, "agent/team-a/old pruned (dry run)")
		require.Contains(t, r.stderr, "config/team-a/old-chat kept: still used by agent(s) manual", "manual is no one's to prune")
		p1, a1 := h.writes()
		require.Equal(t, p0, p1, "a dry run deletes nothing")
		require.Equal(t, a0, a1)
	})

	// manual (unlabelled, made by hand) uses old-chat, so old-chat is kept.
	r := h.run("apply", "-f", dir, "--prune", "-l", "team=a")
	require.Equal(t, occ.ExitErr, r.code, "%s%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "rolebinding/team-a/viewer:user:bob pruned\n")
	require.Contains(t, r.stdout, "agent/team-a/old pruned\n")
	require.NotContains(t, r.stdout, "old-chat pruned")
	require.Contains(t, r.stderr, "config/team-a/old-chat kept: still used by agent(s) manual")
	require.Less(t, strings.Index(r.stdout, "rolebinding/"), strings.Index(r.stdout, "agent/team-a/old pruned"))

	// Once manual uses chat, old-chat goes.
	h.ok("-n", "team-a", "agent", "update", "manual", "--config", "chat")
	p0, a0 := h.writes()
	out := h.ok("apply", "-f", dir, "--prune", "-l", "team=a")
	require.Contains(t, out, "config/team-a/old-chat pruned\n")
	require.Equal(t, 1, strings.Count(out, "pruned"), "%s", out)
	p1, a1 := h.writes()
	require.Equal(t, p0+1, p1, "one deletion")
	require.Equal(t, a0+1, a1, "audited")

	// What is left: the set's objects, manual (no label), team-c's stray
	// (another Namespace).
	agents := h.ok("-n", "team-a", "agent", "list")
	require.Contains(t, agents, "coder")
	require.Contains(t, agents, "manual")
	require.NotContains(t, agents, "old")
	require.NotContains(t, h.ok("-n", "team-a", "config", "list"), "old-chat")
	require.Contains(t, h.ok("-n", "team-c", "agent", "list"), "stray")
	require.NotContains(t, h.ok("rolebinding", "list"), "bob")

	// A second prune deletes nothing and writes nothing.
	out = h.ok("apply", "-f", dir, "--prune", "-l", "team=a")
	require.NotContains(t, out, "pruned")
	p2, a2 := h.writes()
	require.Equal(t, p1, p2)
	require.Equal(t, a1, a2)

	// --prune-namespaces: team-c carries team=a and no manifest here names
	// it: its labelled objects go, then it.
	out = h.ok("apply", "-f", dir, "--prune", "-l", "team=a", "--prune-namespaces")
	require.Contains(t, out, "agent/team-c/stray pruned\nconfig/team-c/chat pruned\nnamespace/team-c pruned\n")
	require.NotContains(t, h.ok("namespace", "list"), "team-c")
}

// A labelled Namespace that still holds an object prune does not delete is
// kept and reported.
func TestPruneKeepsANamespaceThatHoldsMore(t *testing.T) {
	h, dir, _ := pruneHarness(t)
	h.ok("-n", "team-c", "config", "create", "mine", "-f", h.file("mine.json", `{"gateway":{"mode":"local"}}`))
	r := h.run("apply", "-f", dir, "--prune", "-l", "team=a", "--prune-namespaces")
	require.Equal(t, 0, r.code, "%s%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "agent/team-c/stray pruned")
	require.Contains(t, r.stderr, "namespace/team-c kept: it still holds configuration mine")
	require.Contains(t, h.ok("namespace", "list"), "team-c")
}

// The example directory of docs/OPERATIONS.md prunes as the CI job there
// runs it: a second run changes nothing; a file removed takes its objects.
func TestGitopsExamplePrunes(t *testing.T) {
	h := newHarness(t)
	h.teamA()
	src := filepath.Join("..", "docs", "examples", "gitops")
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	files := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		files[e.Name()] = string(b)
	}
	dir := filepath.Join(h.dir, "teams", "team-a")
	h.pruneSet(dir, files)
	const sel = "gitops.oce.dev/set=team-a"
	out := h.ok("apply", "-f", dir, "--prune", "-l", sel)
	require.Contains(t, out, "agent/team-a/coder created")
	require.NotContains(t, out, "pruned")
	p0, a0 := h.writes()
	out = h.ok("apply", "-f", dir, "--prune", "-l", sel)
	require.NotContains(t, out, "pruned")
	require.NotContains(t, out, "created")
	require.NotContains(t, out, "configured")
	p1, a1 := h.writes()
	require.Equal(t, p0, p1)
	require.Equal(t, a0, a1)

	h.pruneSet(dir, without(files, "40-rolebindings.yaml"))
	out = h.ok("apply", "-f", dir, "--prune", "-l", sel)
	require.Contains(t, out, "rolebinding/team-a/deployer:user:alice pruned\n")
	require.Contains(t, out, "rolebinding/team-a/viewer:group:oidc:oncall pruned\n")
	require.Equal(t, 2, strings.Count(out, "pruned"), "%s", out)
}
