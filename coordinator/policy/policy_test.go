package policy_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/policy"
	"oce.dev/oce/coordinator/state"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

type fixture struct {
	t *testing.T
	m *state.Machine
	n int
}

func (f *fixture) apply(cmd state.Named, payload any) {
	f.t.Helper()
	f.n++
	b, err := state.Encode(cmd.Name(), t0.Add(time.Duration(f.n)*time.Second), "bootstrap", payload)
	require.NoError(f.t, err)
	_, err = f.m.ApplyBytes(b)
	require.NoError(f.t, err, cmd)
}

// newFixture: Namespace a with Configuration cfg, credential source key
// (keys k and other) and Agent bot (its own ServicePrincipal, a reference
// to key#k); Namespace b with its own source key; alice admin of a; group
// ops deployer of a, which local user carol is not in.
func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, m: state.NewMachine()}
	f.apply(state.CmdCreateNamespace, state.CreateNamespace{ID: "nsa", Name: "a"})
	f.apply(state.CmdCreateNamespace, state.CreateNamespace{ID: "nsb", Name: "b"})
	f.apply(state.CmdCreateCredentialSource, state.CreateCredentialSource{ID: "ka", NamespaceID: "nsa", Name: "key", Keys: []string{"k", "other"}})
	f.apply(state.CmdCreateCredentialSource, state.CreateCredentialSource{ID: "kb", NamespaceID: "nsb", Name: "key", Keys: []string{"k"}})
	f.apply(state.CmdCreateUser, state.CreateUser{ID: "u1", Name: "alice"})
	f.apply(state.CmdCreateUser, state.CreateUser{ID: "u2", Name: "carol"})
	f.apply(state.CmdCreateRoleBinding, state.CreateRoleBinding{ID: "b1", Role: state.RoleAdmin, NamespaceID: "nsa",
		SubjectKind: state.PrincipalUser, Subject: "alice"})
	f.apply(state.CmdCreateRoleBinding, state.CreateRoleBinding{ID: "b3", Role: state.RoleDeployer, NamespaceID: "nsa",
		SubjectKind: state.SubjectGroup, Subject: "ops"})
	f.apply(state.CmdPutConfiguration, state.PutConfiguration{ID: "c1", NamespaceID: "nsa", Name: "cfg",
		Document: json.RawMessage(admission.ExampleEmbeddedAnthropic)})
	f.apply(state.CmdCreateAgent, state.CreateAgent{ID: "a1", NamespaceID: "nsa", Name: "bot", ConfigurationID: "c1",
		ServicePrincipalID: "sp-bot", OwnServicePrincipal: true,
		HarnessAuth: &state.HarnessAuth{Method: "api_key", CredentialKind: "secret", SourceRef: "credential:key#k"}})
	return f
}

// recorder is an IAM driver that records every request and answers each
// with the decision its action is given (allow when absent).
type recorder struct {
	reqs   []iam.Request
	denied map[iam.Action]bool
	err    error
}

func (r *recorder) Authorize(_ context.Context, req iam.Request) (iam.Decision, error) {
	r.reqs = append(r.reqs, req)
	if r.err != nil {
		return iam.Decision{}, r.err
	}
	if r.denied[req.Action] {
		return iam.Decision{Reasons: []string{"test"}}, nil
	}
	return iam.Decision{Allowed: true}, nil
}

func (r *recorder) ValidateRestriction(string) error { return nil }

// step is one recorded decision: its action, resource and whether it asked
// the roles alone.
type step struct {
	act       iam.Action
	res       string
	rolesOnly bool
}

func (r *recorder) steps() []step {
	var out []step
	for _, q := range r.reqs {
		out = append(out, step{q.Action, q.Resource.String(), q.RolesOnly})
	}
	return out
}

// TestDeployDecidesInFiveSteps: the permission by the roles, the
// ServicePrincipal, the credential source, admission, then the permission
// with the admitted facts; a refusal at any step ends the decision there.
func TestDeployDecidesInFiveSteps(t *testing.T) {
	f := newFixture(t)
	a, _ := f.m.Agent("a1")
	ns, _ := f.m.Namespace("nsa")
	all := []step{
		{iam.DeployAgent, `Agent::"a/bot"`, true},
		{iam.UseServicePrincipal, `ServicePrincipal::"a/bot"`, false},
		{iam.UseCredentialSource, `CredentialSource::"a/key"`, false},
		{iam.DeployAgent, `Agent::"a/bot"`, false},
	}
	errAdmit := errors.New("not admitted")
	for _, tc := range []struct {
		name     string
		denied   iam.Action
		admitErr error
		steps    int
		admitted bool
	}{
		{name: "allowed", steps: 4, admitted: true},
		{name: "no use of the service principal", denied: iam.UseServicePrincipal, steps: 2},
		{name: "no use of the credential source", denied: iam.UseCredentialSource, steps: 3},
		{name: "not admitted", admitErr: errAdmit, steps: 3, admitted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{denied: map[iam.Action]bool{tc.denied: true}}
			admitted := false
			rev, err := policy.Decider{IAM: rec, State: f.m}.Deploy(context.Background(), policy.Deploy{
				Principal: iam.Principal{Kind: iam.KindUser, Name: "alice"}, Namespace: ns, Agent: a,
				ServicePrincipalID: a.ServicePrincipalID, HarnessAuth: a.HarnessAuth,
				Admit: func() (state.Revision, admission.Output, error) {
					admitted = true
					return state.Revision{ID: "r1", Harness: state.HarnessIdentity{ID: state.HarnessOpenClaw}}, admission.Output{}, tc.admitErr
				}})
			require.Equal(t, all[:tc.steps], rec.steps())
			require.Equal(t, tc.admitted, admitted)
			switch {
			case tc.denied != "":
				var d *policy.Denied
				require.ErrorAs(t, err, &d)
				require.Equal(t, tc.denied, d.Action)
				require.Equal(t, []string{"test"}, d.Reasons)
			case tc.admitErr != nil:
				require.ErrorIs(t, err, errAdmit)
			default:
				require.NoError(t, err)
				require.Equal(t, "r1", rev.ID)
				require.Equal(t, "openclaw", rec.reqs[3].Context["harness"], "the last step reads the admitted facts")
			}
		})
	}
	t.Run("denied by the roles before anything else", func(t *testing.T) {
		rec := &recorder{denied: map[iam.Action]bool{iam.DeployAgent: true}}
		_, err := policy.Decider{IAM: rec, State: f.m}.Deploy(context.Background(), policy.Deploy{Namespace: ns, Agent: a,
			ServicePrincipalID: a.ServicePrincipalID, HarnessAuth: a.HarnessAuth,
			Admit: func() (state.Revision, admission.Output, error) { panic("admitted before the permission") }})
		var d *policy.Denied
		require.ErrorAs(t, err, &d)
		require.Equal(t, all[:1], rec.steps())
	})
	t.Run("a driver failure is undecided", func(t *testing.T) {
		boom := errors.New("boom")
		_, err := policy.Decider{IAM: &recorder{err: boom}, State: f.m}.Deploy(context.Background(), policy.Deploy{
			Namespace: ns, Agent: a})
		var u *policy.Undecided
		require.ErrorAs(t, err, &u)
		require.ErrorIs(t, err, boom)
		require.Equal(t, iam.DeployAgent, u.Action)
	})
	t.Run("a service principal of another namespace is gone", func(t *testing.T) {
		f.apply(state.CmdCreateServicePrincipal, state.CreateServicePrincipal{ID: "sp-b", NamespaceID: "nsb", Name: "x"})
		_, err := policy.Decider{IAM: &recorder{}, State: f.m}.Deploy(context.Background(), policy.Deploy{
			Namespace: ns, Agent: a, ServicePrincipalID: "sp-b"})
		require.ErrorIs(t, err, policy.ErrServicePrincipalGone)
	})
}

// TestNoCredentialReferenceNeedsNoDecision: a binding without a sourceRef
// (or none) asks nothing.
func TestNoCredentialReferenceNeedsNoDecision(t *testing.T) {
	f := newFixture(t)
	ns, _ := f.m.Namespace("nsa")
	rec := &recorder{denied: map[iam.Action]bool{iam.UseCredentialSource: true}}
	d := policy.Decider{IAM: rec, State: f.m}
	require.NoError(t, d.UseCredentialSource(context.Background(), iam.Principal{}, ns, nil))
	require.NoError(t, d.UseCredentialSource(context.Background(), iam.Principal{}, ns, &state.HarnessAuth{Method: "api_key"}))
	require.Empty(t, rec.reqs)
	err := d.UseCredentialSource(context.Background(), iam.Principal{}, ns, &state.HarnessAuth{Method: "api_key", SourceRef: "secret:key#k"})
	var denied *policy.Denied
	require.ErrorAs(t, err, &denied)
	require.Equal(t, `CredentialSource::"a/key"`, denied.Resource.String(), "a legacy spelling names the same source")
	require.Equal(t, map[string]any{"method": "api_key", "kind": ""}, denied.Resource.Attrs)
}

// TestReferencesResolveInTheAgentsNamespaceOnly: a reference is refused
// before any permission is asked when it is malformed, names another
// Namespace (even one that holds a source of that name) or a source or key
// its own Namespace does not hold; every spelling of a source of its own
// Namespace reaches the one decision on that source.
func TestReferencesResolveInTheAgentsNamespaceOnly(t *testing.T) {
	f := newFixture(t)
	ns, _ := f.m.Namespace("nsa")
	for _, tc := range []struct {
		ref  string
		code string
		res  string
	}{
		{"credential:key#k", "", `CredentialSource::"a/key"`},
		{"credential:a/key#other", "", `CredentialSource::"a/key"`},
		{"secret:key#k", "", `CredentialSource::"a/key"`},
		{"secret://a/key#k", "", `CredentialSource::"a/key"`},
		{"credential:b/key#k", "CROSS_NAMESPACE_REFERENCE", `CredentialSource::"b/key"`},
		{"secret://b/key#k", "CROSS_NAMESPACE_REFERENCE", `CredentialSource::"b/key"`},
		{"credential:nope", "CREDENTIAL_SOURCE_NOT_FOUND", `CredentialSource::"a/nope"`},
		{"credential:key#missing", "CREDENTIAL_SOURCE_NOT_FOUND", `CredentialSource::"a/key"`},
		{"credential:key", "CREDENTIAL_SOURCE_NOT_FOUND", `CredentialSource::"a/key"`}, // two keys: name one
		{"local:key", "CREDENTIAL_SOURCE_NOT_FOUND", `CredentialSource::"a/key"`},
		{"secret:key", "CREDENTIAL_REFERENCE_INVALID", `CredentialSource::"a/"`},
	} {
		rec := &recorder{}
		err := policy.Decider{IAM: rec, State: f.m}.UseCredentialSource(context.Background(), iam.Principal{}, ns,
			&state.HarnessAuth{Method: "api_key", SourceRef: tc.ref})
		if tc.code == "" {
			require.NoError(t, err, tc.ref)
			require.Equal(t, []step{{iam.UseCredentialSource, tc.res, false}}, rec.steps(), tc.ref)
			continue
		}
		var rr *policy.ReferenceRefused
		require.ErrorAs(t, err, &rr, tc.ref)
		require.Equal(t, tc.code, string(rr.Code), tc.ref)
		require.Equal(t, tc.res, rr.Resource.String(), tc.ref)
		require.Empty(t, rec.reqs, "%s: nothing is asked of the IAM driver", tc.ref)
	}
}

// TestReauthorizationRefusesReferencesAlike: frozen work whose reference no
// longer resolves in its Namespace fails with the reference's own code
// before any effect (the API refuses the same deploy the same way).
func TestReauthorizationRefusesReferencesAlike(t *testing.T) {
	f := newFixture(t)
	a, _ := f.m.Agent("a1")
	cfg, _ := f.m.Configuration("c1")
	out, err := admission.Admit(admission.Input{Agent: a, Configuration: cfg})
	require.NoError(t, err)
	ra := &policy.Reauthorizer{Driver: iam.NewCedar(f.m), State: f.m}
	for i, tc := range []struct{ ref, code string }{
		{"credential:key#k", ""},
		{"credential:b/key#k", "CROSS_NAMESPACE_REFERENCE"},
		{"credential:gone", "CREDENTIAL_SOURCE_NOT_FOUND"},
		{"key", "INVALID_ADMITTED_REVISION"},
	} {
		auth := &state.HarnessAuth{Method: "api_key", CredentialKind: "secret", SourceRef: tc.ref}
		id := string(rune('a' + i))
		f.apply(state.CmdAdmitRevision, state.AdmitRevision{WorkID: "w" + id, Revision: state.Revision{ID: "r" + id,
			AgentID: "a1", NamespaceID: "nsa", Document: out.Document, ConfigurationID: "c1", ConfigurationGeneration: 1,
			Harness: out.Harness, Mode: out.Mode, ComputeID: "memory", HarnessAuth: auth, ServicePrincipalID: "sp-bot"}})
		w, ok := f.m.Work("w" + id)
		require.True(t, ok)
		w.Actor = "user:alice"
		err := ra.Reauthorize(context.Background(), w)
		if tc.code == "" {
			require.NoError(t, err, tc.ref)
			continue
		}
		var re *policy.ReauthError
		require.ErrorAs(t, err, &re, tc.ref)
		require.Equal(t, tc.code, string(re.Code), "%s: %s", tc.ref, re.Detail)
	}
}

// TestReauthorizeRemembersOnlyWhileNothingChanged: a work that passed passes
// again from memory, but a revoked role binding (any identity change) is
// seen at the next claim.
func TestReauthorizeRemembersOnlyWhileNothingChanged(t *testing.T) {
	f := newFixture(t)
	ra := &policy.Reauthorizer{Driver: iam.NewCedar(f.m), State: f.m}
	w := state.Work{ID: "w1", Kind: state.WorkStop, NamespaceID: "nsa", AgentID: "a1", Actor: "user:carol", ActorGroups: nil}
	require.Error(t, ra.Reauthorize(context.Background(), w), "carol deploys only through group ops, which the work does not carry")
	w.Actor = "user:alice"
	require.NoError(t, ra.Reauthorize(context.Background(), w))
	require.NoError(t, ra.Reauthorize(context.Background(), w), "remembered")
	f.apply(state.CmdDeleteRoleBinding, state.DeleteRoleBinding{BindingID: "b1"})
	err := ra.Reauthorize(context.Background(), w)
	var re *policy.ReauthError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "REAUTHORIZATION_DENIED", string(re.Code))
}
