package iam_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

type fixture struct {
	t *testing.T
	m *state.Machine
	n int
}

func (f *fixture) apply(typ state.Named, payload any) any {
	f.t.Helper()
	f.n++
	b, err := state.Encode(typ.Name(), t0.Add(time.Duration(f.n)*time.Second), "bootstrap", payload)
	require.NoError(f.t, err)
	res, err := f.m.ApplyBytes(b)
	require.NoError(f.t, err)
	return res
}

// newFixture: Namespaces a and b; alice admin of a, bob viewer of a, carol
// deployer of a via group ops, dave cluster-admin, mia metrics-reader (the
// scrape identity); ci a service principal of a with deployer.
func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, m: state.NewMachine()}
	f.apply(state.CmdCreateNamespace, state.CreateNamespace{ID: "nsa", Name: "a"})
	f.apply(state.CmdCreateNamespace, state.CreateNamespace{ID: "nsb", Name: "b"})
	for i, u := range []string{"alice", "bob", "carol", "dave", "mia"} {
		f.apply(state.CmdCreateUser, state.CreateUser{ID: "u" + string(rune('0'+i)), Name: u})
	}
	f.apply(state.CmdCreateServicePrincipal, state.CreateServicePrincipal{ID: "sp1", NamespaceID: "nsa", Name: "ci"})
	bind := func(id, role, ns, kind, subject string) {
		f.apply(state.CmdCreateRoleBinding, state.CreateRoleBinding{ID: id, Role: role, NamespaceID: ns, SubjectKind: kind, Subject: subject})
	}
	bind("b1", state.RoleAdmin, "nsa", state.PrincipalUser, "alice")
	bind("b2", state.RoleViewer, "nsa", state.PrincipalUser, "bob")
	bind("b3", state.RoleDeployer, "nsa", state.SubjectGroup, "ops")
	bind("b4", state.RoleClusterAdmin, "", state.PrincipalUser, "dave")
	bind("b5", state.RoleDeployer, "nsa", state.PrincipalServicePrincipal, "sp1")
	bind("b6", state.RoleMetricsReader, "", state.PrincipalUser, "mia")
	return f
}

func user(name string, groups ...string) iam.Principal {
	return iam.Principal{Kind: iam.KindUser, Name: name, Groups: groups}
}

func TestRoles(t *testing.T) {
	f := newFixture(t)
	d := iam.NewCedar(f.m)
	agentA := iam.Scoped(iam.TypeAgent, "a", "bot", nil)
	agentB := iam.Scoped(iam.TypeAgent, "b", "bot", nil)
	ci := iam.Principal{Kind: iam.KindServicePrincipal, Name: "ci", ID: "sp1", Namespace: "a"}
	for _, tc := range []struct {
		name string
		p    iam.Principal
		act  iam.Action
		res  iam.Resource
		want bool
	}{
		{"viewer views", user("bob"), iam.ViewAgent, agentA, true},
		{"viewer cannot deploy", user("bob"), iam.DeployAgent, agentA, false},
		{"viewer cannot view another namespace", user("bob"), iam.ViewAgent, agentB, false},
		{"group deployer deploys", user("carol", "ops"), iam.DeployAgent, agentA, true},
		{"group deployer views", user("carol", "ops"), iam.ViewNamespace, iam.NamespaceRes("a"), true},
		{"group deployer cannot create", user("carol", "ops"), iam.CreateAgent, agentA, false},
		{"no group no role", user("carol"), iam.DeployAgent, agentA, false},
		{"admin creates", user("alice"), iam.CreateAgent, agentA, true},
		{"admin deploys", user("alice"), iam.DeployAgent, agentA, true},
		{"admin of a not of b", user("alice"), iam.ViewAgent, agentB, false},
		{"admin cannot create namespaces", user("alice"), iam.CreateNamespace, iam.NamespaceRes("c"), false},
		{"cluster-admin creates namespaces", user("dave"), iam.CreateNamespace, iam.NamespaceRes("c"), true},
		{"cluster-admin everywhere", user("dave"), iam.DeployAgent, agentB, true},
		{"bootstrap is cluster-admin", iam.Principal{Kind: iam.KindBootstrap}, iam.AdministerCluster, iam.ClusterRes(), true},
		{"admin cannot administer cluster", user("alice"), iam.AdministerCluster, iam.ClusterRes(), false},
		{"service principal deploys", ci, iam.DeployAgent, agentA, true},
		{"service principal not in b", ci, iam.DeployAgent, agentB, false},
		{"own tokens", user("bob"), iam.ManageTokens, iam.Resource{Type: iam.TypeUser, Name: "bob"}, true},
		{"not others' tokens", user("bob"), iam.ManageTokens, iam.Resource{Type: iam.TypeUser, Name: "alice"}, false},
		{"anyone reads the installation", user("nobody"), iam.ViewInstallation, iam.ClusterRes(), true},
		{"metrics-reader reads metrics", user("mia"), iam.ViewMetrics, iam.ClusterRes(), true},
		{"metrics-reader does not view the cluster", user("mia"), iam.ViewCluster, iam.ClusterRes(), false},
		{"metrics-reader reads no audit", user("mia"), iam.ViewAudit, iam.ClusterRes(), false},
		{"metrics-reader views no agent", user("mia"), iam.ViewAgent, agentA, false},
		{"metrics-reader views no namespace", user("mia"), iam.ViewNamespace, iam.NamespaceRes("a"), false},
		{"metrics-reader administers nothing", user("mia"), iam.AdministerCluster, iam.ClusterRes(), false},
		{"a namespace admin reads no metrics", user("alice"), iam.ViewMetrics, iam.ClusterRes(), false},
		{"cluster-admin reads metrics", user("dave"), iam.ViewMetrics, iam.ClusterRes(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dec, err := d.Authorize(context.Background(), iam.Request{Principal: tc.p, Action: tc.act, Resource: tc.res})
			require.NoError(t, err)
			require.Equal(t, tc.want, dec.Allowed, dec.Reasons)
		})
	}
}

func TestRestrictionsForbidOnlyWhatTheyName(t *testing.T) {
	f := newFixture(t)
	d := iam.NewCedar(f.m)
	pol := `forbid (principal, action == Action::"DeployAgent", resource in Namespace::"a")
when { context.harness == "codex" && context.mode == "dedicated" };`
	require.NoError(t, d.ValidateRestriction(pol))
	f.apply(state.CmdPutRestriction, state.PutRestriction{ID: "r1", Name: "no-dedicated-codex", Policy: pol})
	deploy := func(ns, harness, mode string) bool {
		dec, err := d.Authorize(context.Background(), iam.Request{Principal: user("alice"), Action: iam.DeployAgent,
			Resource: iam.Scoped(iam.TypeAgent, ns, "bot", nil),
			Context:  map[string]any{"harness": harness, "mode": mode}})
		require.NoError(t, err)
		return dec.Allowed
	}
	require.False(t, deploy("a", "codex", "dedicated"))
	require.True(t, deploy("a", "openclaw", "embedded"))
	dave := func(act iam.Action, res iam.Resource, c map[string]any) bool {
		dec, err := d.Authorize(context.Background(), iam.Request{Principal: user("dave"), Action: act, Resource: res, Context: c})
		require.NoError(t, err)
		return dec.Allowed
	}
	require.True(t, dave(iam.DeployAgent, iam.Scoped(iam.TypeAgent, "b", "bot", nil), map[string]any{"harness": "codex", "mode": "dedicated"}))
	require.False(t, dave(iam.DeployAgent, iam.Scoped(iam.TypeAgent, "a", "bot", nil), map[string]any{"harness": "codex", "mode": "dedicated"}))
	require.True(t, dave(iam.StopAgent, iam.Scoped(iam.TypeAgent, "a", "bot", nil), nil))
	// RolesOnly skips Restrictions (the permission pre-check).
	dec, err := d.Authorize(context.Background(), iam.Request{Principal: user("alice"), Action: iam.DeployAgent,
		Resource: iam.Scoped(iam.TypeAgent, "a", "bot", nil), RolesOnly: true})
	require.NoError(t, err)
	require.True(t, dec.Allowed)
	// A Restriction that errors (no context) denies: fail closed.
	require.False(t, dave(iam.DeployAgent, iam.Scoped(iam.TypeAgent, "a", "bot", nil), nil))
}

func TestValidateRestriction(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		line       int
		msg        string
	}{
		{"permit refused", "// one\npermit (principal, action, resource);", 2, "only forbid"},
		{"parse error", "forbid (principal, action, resource)\nwhen { context.harness == ", 2, ""},
		{"unknown attribute", "forbid (principal, action == Action::\"DeployAgent\", resource)\n\nwhen { context.harnes == \"codex\" };", 3, "harnes"},
		{"unknown action", "\n\nforbid (principal, action == Action::\"Nope\", resource);", 3, "Nope"},
		{"empty", "// nothing", 1, "no policy"},
		{"wrong type", "forbid (principal, action == Action::\"DeployAgent\", resource)\nwhen { context.customEndpoint == \"yes\" };", 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := iam.ParseRestriction("r", tc.text)
			var pe *iam.PolicyError
			require.ErrorAs(t, err, &pe)
			require.ErrorIs(t, err, iam.ErrPolicy)
			require.Equal(t, tc.line, pe.Line, pe.Message)
			require.Contains(t, pe.Message, tc.msg)
		})
	}
	_, err := iam.ParseRestriction("r", `forbid (principal, action == Action::"DeployAgent", resource) when { context.customEndpoint };`)
	require.NoError(t, err)
}
