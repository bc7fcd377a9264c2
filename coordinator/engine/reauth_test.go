package engine_test

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/coordinator/engine"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/policy"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// TestReauthorizationBeforeEffects: work admitted while its actor was
// allowed, whose permission is then revoked (a removed role binding, a
// deleted user, a Restriction added, a removed issuer-group binding), fails
// at claim with a closed code, and the compute driver is never called for
// it; work whose actor is still allowed activates.
func TestReauthorizationBeforeEffects(t *testing.T) {
	m := state.NewMachine()
	clk := engine.NewFakeClock(t0)
	admin := engine.NewLocalProposer(m, clk, iam.BootstrapActor)
	must := func(p *engine.LocalProposer, typ state.Named, payload any) {
		t.Helper()
		_, err := p.Propose(context.Background(), typ.Name(), payload)
		require.NoError(t, err, typ)
	}
	must(admin, state.CmdCreateNamespace, state.CreateNamespace{ID: "ns1", Name: "team"})
	must(admin, state.CmdPutConfiguration, state.PutConfiguration{ID: "c1", NamespaceID: "ns1", Name: "cfg",
		Document: json.RawMessage(admission.ExampleEmbeddedAnthropic)})
	cases := []struct {
		agent, actor string
		groups       []string
		allowed      bool
		source       string     // the credential source its reference names (default key)
		code         codes.Code // its work's code when refused (default REAUTHORIZATION_DENIED)
	}{
		{agent: "revoked", actor: "user:dan"},             // dan's deployer binding is removed
		{agent: "kept", actor: "user:kim", allowed: true}, // kim keeps hers
		{agent: "deleted-user", actor: "user:del"},        // del is deleted
		{agent: "restricted", actor: "user:kim"},          // a Restriction names this Agent
		{agent: "group", actor: "user:oidc:zoe", groups: []string{"oidc:ops"}, allowed: true},
		{agent: "group-gone", actor: "user:oidc:yan", groups: []string{"oidc:gone"}},
		{agent: "withdrawn", actor: "user:kim", source: "gone", code: codes.CredentialSourceNotFound}, // its source is withdrawn
	}
	must(admin, state.CmdCreateCredentialSource, state.CreateCredentialSource{ID: "k-key", NamespaceID: "ns1", Name: "key", Keys: []string{"value"}})
	must(admin, state.CmdCreateCredentialSource, state.CreateCredentialSource{ID: "k-gone", NamespaceID: "ns1", Name: "gone", Keys: []string{"value"}})
	for _, u := range []string{"dan", "kim", "del"} {
		must(admin, state.CmdCreateUser, state.CreateUser{ID: "u-" + u, Name: u})
		must(admin, state.CmdCreateRoleBinding, state.CreateRoleBinding{ID: "b-" + u, Role: state.RoleDeployer,
			NamespaceID: "ns1", SubjectKind: state.PrincipalUser, Subject: u})
	}
	for _, g := range []string{"oidc:ops", "oidc:gone"} {
		must(admin, state.CmdCreateRoleBinding, state.CreateRoleBinding{ID: "b-" + g, Role: state.RoleDeployer,
			NamespaceID: "ns1", SubjectKind: state.SubjectGroup, Subject: g})
	}
	cfg, _ := m.Configuration("c1")
	for _, c := range cases {
		source := cmp.Or(c.source, "key")
		must(admin, state.CmdCreateAgent, state.CreateAgent{ID: "a-" + c.agent, NamespaceID: "ns1", Name: c.agent,
			ConfigurationID: "c1", ServicePrincipalID: "sp-" + c.agent, OwnServicePrincipal: true, ComputeID: memory.Name,
			HarnessAuth: &state.HarnessAuth{Method: "api_key", SourceRef: "credential:" + source}})
		a, _ := m.Agent("a-" + c.agent)
		out, err := admission.Admit(admission.Input{Agent: a, Configuration: cfg})
		require.NoError(t, err)
		actor := engine.NewLocalProposer(m, clk, c.actor)
		must(actor, state.CmdAdmitRevision, state.AdmitRevision{WorkID: "w-" + c.agent, ActorGroups: c.groups,
			Revision: state.Revision{ID: "r-" + c.agent, AgentID: a.ID, NamespaceID: "ns1", Document: out.Document,
				ConfigurationID: "c1", ConfigurationGeneration: 1, Harness: out.Harness, Mode: out.Mode,
				ComputeID: memory.Name, HarnessAuth: a.HarnessAuth, ServicePrincipalID: a.ServicePrincipalID}})
	}
	// Between admission and claim, permissions change.
	must(admin, state.CmdDeleteRoleBinding, state.DeleteRoleBinding{BindingID: "b-dan"})
	must(admin, state.CmdDeleteUser, state.DeleteUser{UserID: "u-del"})
	must(admin, state.CmdDeleteRoleBinding, state.DeleteRoleBinding{BindingID: "b-oidc:gone"})
	must(admin, state.CmdPutRestriction, state.PutRestriction{ID: "r1", Name: "freeze",
		Policy: `forbid (principal, action == Action::"DeployAgent", resource == Agent::"team/restricted");`})
	must(admin, state.CmdWithdrawCredentialSource, state.WithdrawCredentialSource{ID: "k-gone"})

	drv := memory.New(memory.DefaultCapabilities())
	ra := &policy.Reauthorizer{Driver: iam.NewCedar(m), State: m}
	e := engine.New(engine.Config{Owner: "eng", Seed: 1, Reauthorizer: ra}, admin, drv, clk, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	require.Eventually(t, func() bool {
		for _, c := range cases {
			w, _ := m.Work("w-" + c.agent)
			if w.State != state.WorkCompleted && w.State != state.WorkFailed {
				return false
			}
		}
		return true
	}, 20*time.Second, 5*time.Millisecond)
	for _, c := range cases {
		w, _ := m.Work("w-" + c.agent)
		rev, _ := m.Revision("r-" + c.agent)
		prepared := slices.Contains(drv.CallsOf(memory.OpPrepare), rev.ID)
		if c.allowed {
			require.Equal(t, state.WorkCompleted, w.State, c.agent)
			require.True(t, prepared, c.agent)
			continue
		}
		require.Equal(t, state.WorkFailed, w.State, c.agent)
		require.Equal(t, string(cmp.Or(c.code, codes.ReauthorizationDenied)), w.LastCode, "%s: %s", c.agent, w.LastDetail)
		require.Equal(t, state.RevisionFailed, rev.Status, c.agent)
		// Nothing started: no driver call names the revision.
		for _, call := range drv.Calls() {
			require.NotEqual(t, rev.ID, call.ID, "%s: %s was called", c.agent, call.Op)
		}
		require.False(t, prepared)
	}
	// The failure's audit record carries the original actor.
	var fails []state.AuditRecord
	for _, r := range m.Audit(0, 0) {
		if r.Action == state.AuditFail {
			fails = append(fails, r)
		}
	}
	require.Len(t, fails, 5)
	byRev := map[string]state.AuditRecord{}
	for _, r := range fails {
		byRev[r.RevisionID] = r
	}
	require.Equal(t, "user:dan", byRev["r-revoked"].Actor)
	require.Equal(t, "user:oidc:yan", byRev["r-group-gone"].Actor)
	require.Equal(t, state.OutcomeFailure, byRev["r-revoked"].Outcome)
	require.Equal(t, string(codes.ReauthorizationDenied), byRev["r-revoked"].Details["code"])
	require.Equal(t, "user:kim", byRev["r-withdrawn"].Actor, "a refused use of a missing source is audited with its actor")
	require.Equal(t, string(codes.CredentialSourceNotFound), byRev["r-withdrawn"].Details["code"])
}

// TestReauthorizationOwnership: a revision whose frozen ServicePrincipal is
// no longer the Agent's fails with INVALID_REVISION_OWNER before effects.
func TestReauthorizationOwnership(t *testing.T) {
	m := state.NewMachine()
	clk := engine.NewFakeClock(t0)
	p := engine.NewLocalProposer(m, clk, iam.BootstrapActor)
	_, err := p.Propose(context.Background(), state.CmdCreateNamespace.Name(), state.CreateNamespace{ID: "ns1", Name: "team"})
	require.NoError(t, err)
	ra := &policy.Reauthorizer{Driver: iam.NewCedar(m), State: m}
	err = ra.Reauthorize(context.Background(), state.Work{ID: "w", Kind: state.WorkActivate, NamespaceID: "ns2",
		AgentID: "missing", Actor: iam.BootstrapActor})
	require.NoError(t, err, "work of a missing Agent is left to the engine's own validation")
	_, err = iam.PrincipalOf(m, "somebody", nil)
	require.ErrorIs(t, err, iam.ErrUnknownActor)
}
