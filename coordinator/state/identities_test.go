package state

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func identityFixture(t *testing.T) *Machine {
	m := NewMachine()
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	apply := func(typ Named, p any) {
		t.Helper()
		b, err := Encode(typ.Name(), at, "bootstrap", p)
		require.NoError(t, err)
		_, err = m.ApplyBytes(b)
		require.NoError(t, err, typ)
		at = at.Add(time.Second)
	}
	hash := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	apply(CmdCreateNamespace, CreateNamespace{ID: "ns1", Name: "team"})
	apply(CmdPutConfiguration, PutConfiguration{ID: "c1", NamespaceID: "ns1", Name: "cfg", Document: []byte(`{}`)})
	apply(CmdCreateAgent, CreateAgent{ID: "a1", NamespaceID: "ns1", Name: "bot", ConfigurationID: "c1",
		ServicePrincipalID: "sp-bot", OwnServicePrincipal: true})
	apply(CmdCreateUser, CreateUser{ID: "u1", Name: "alice", Groups: []string{"devs"}})
	apply(CmdCreateServicePrincipal, CreateServicePrincipal{ID: "sp1", NamespaceID: "ns1", Name: "ci"})
	apply(CmdCreateToken, CreateToken{ID: "t1", PrincipalKind: PrincipalUser, PrincipalID: "u1", Hash: hash, ExpiresAt: at.Add(time.Hour)})
	apply(CmdCreateToken, CreateToken{ID: "t2", PrincipalKind: PrincipalUser, PrincipalID: "u1", Hash: hash[:63] + "0",
		ExpiresAt: at.Add(time.Hour), Replaces: "t1"})
	apply(CmdCreateRoleBinding, CreateRoleBinding{ID: "b1", Role: RoleAdmin, NamespaceID: "ns1", SubjectKind: PrincipalUser, Subject: "alice"})
	apply(CmdCreateRoleBinding, CreateRoleBinding{ID: "b2", Role: RoleDeployer, NamespaceID: "ns1", SubjectKind: PrincipalServicePrincipal, Subject: "sp1"})
	apply(CmdPutRestriction, PutRestriction{ID: "r1", Name: "no-x", Policy: "forbid (principal, action, resource);"})
	apply(CmdRecordAudit, RecordAudit{Action: "oce.cluster.join", Resource: ClusterResource, Outcome: OutcomeSuccess})
	apply(CmdAdmitRevision, AdmitRevision{WorkID: "w1", ActorGroups: []string{"oidc:ops"}, Revision: Revision{ID: "r1",
		AgentID: "a1", NamespaceID: "ns1", Document: []byte(`{}`), ConfigurationID: "c1", ConfigurationGeneration: 1,
		Harness: HarnessIdentity{ID: HarnessOpenClaw, Version: "1"}, Mode: ModeEmbedded, ServicePrincipalID: "sp-bot"}})
	return m
}

func TestIdentitiesSnapshotRoundTrip(t *testing.T) {
	m := identityFixture(t)
	b, err := m.MarshalSnapshot()
	require.NoError(t, err)
	m2 := NewMachine()
	require.NoError(t, m2.RestoreSnapshot(b))
	require.Equal(t, m.Digest(), m2.Digest())
	u, ok := m2.UserByName("alice")
	require.True(t, ok)
	require.Equal(t, []string{"devs"}, u.Groups)
	t1, _ := m2.Token("t1")
	require.False(t, t1.RevokedAt.IsZero(), "rotation revoked the replaced token")
	sp, ok := m2.ServicePrincipalByName("ns1", "bot")
	require.True(t, ok)
	require.Equal(t, "a1", sp.AgentID)
	w, _ := m2.Work("w1")
	require.Equal(t, []string{"oidc:ops"}, w.ActorGroups)
	r, _ := m2.Revision("r1")
	require.Equal(t, "sp-bot", r.ServicePrincipalID)
	require.Len(t, m2.RoleBindings(), 2)
	require.Len(t, m2.Restrictions(), 1)
	last := m2.Audit(0, 0)
	require.Equal(t, "openclaw.agents.lifecycle.deploy", last[len(last)-1].Action)
	require.Equal(t, `Agent::"team/bot"`, last[len(last)-1].Resource)
	// An unknown section is refused, not dropped.
	bad := append([]byte{}, b...)
	i := len(bad) - 1
	for ; i > 0 && string(bad[i-len("identities")+1:i+1]) != "identities"; i-- {
	}
	require.Positive(t, i)
	copy(bad[i-len("identities")+1:], "identitiez")
	require.ErrorIs(t, NewMachine().RestoreSnapshot(bad), ErrInvalid)
}

// TestRestoresVersion2: a snapshot of the previous release (binary version
// 2, made by its code) restores, with no identity data and no frozen
// ServicePrincipals.
func TestRestoresVersion2(t *testing.T) {
	b, err := os.ReadFile("testdata/snapshot-v2.bin")
	require.NoError(t, err)
	m := NewMachine()
	require.NoError(t, m.RestoreSnapshot(b))
	a, ok := m.Agent("a1")
	require.True(t, ok)
	require.Empty(t, a.ServicePrincipalID)
	w, ok := m.Work("w1")
	require.True(t, ok)
	require.Equal(t, "admin", w.Actor)
	require.Empty(t, m.Users())
	require.Len(t, m.Audit(0, 0), 1)
	// Written again as version 3, it restores to the same state.
	b3, err := m.MarshalSnapshot()
	require.NoError(t, err)
	m3 := NewMachine()
	require.NoError(t, m3.RestoreSnapshot(b3))
	require.Equal(t, m.Digest(), m3.Digest())
}

func TestIdentityCommandsRefuse(t *testing.T) {
	m := identityFixture(t)
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		typ  Named
		p    any
		want error
	}{
		"duplicate user name":           {CmdCreateUser, CreateUser{ID: "u2", Name: "alice"}, ErrConflict},
		"bad user name":                 {CmdCreateUser, CreateUser{ID: "u3", Name: "Alice"}, ErrInvalid},
		"token without principal":       {CmdCreateToken, CreateToken{ID: "t9", PrincipalKind: PrincipalUser, PrincipalID: "nobody", Hash: "ab" + string(make([]byte, 0)), ExpiresAt: at.Add(time.Hour)}, ErrInvalid},
		"token too long":                {CmdCreateToken, CreateToken{ID: "t9", PrincipalKind: PrincipalUser, PrincipalID: "u1", Hash: "1111111111111111111111111111111111111111111111111111111111111111", ExpiresAt: at.Add(MaxTokenLifetime + time.Hour)}, ErrInvalid},
		"revoke twice":                  {CmdRevokeToken, RevokeToken{TokenID: "t1"}, ErrConflict},
		"cluster-admin in a namespace":  {CmdCreateRoleBinding, CreateRoleBinding{ID: "b9", Role: RoleClusterAdmin, NamespaceID: "ns1", SubjectKind: PrincipalUser, Subject: "x"}, ErrInvalid},
		"metrics-reader in a namespace": {CmdCreateRoleBinding, CreateRoleBinding{ID: "b9", Role: RoleMetricsReader, NamespaceID: "ns1", SubjectKind: PrincipalUser, Subject: "x"}, ErrInvalid},
		"namespace role without one":    {CmdCreateRoleBinding, CreateRoleBinding{ID: "b9", Role: RoleViewer, SubjectKind: PrincipalUser, Subject: "x"}, ErrInvalid},
		"duplicate binding":             {CmdCreateRoleBinding, CreateRoleBinding{ID: "b9", Role: RoleAdmin, NamespaceID: "ns1", SubjectKind: PrincipalUser, Subject: "alice"}, ErrConflict},
		"delete a principal in use":     {CmdDeleteServicePrincipal, DeleteServicePrincipal{ServicePrincipalID: "sp-bot"}, ErrConflict},
		"restriction name taken":        {CmdPutRestriction, PutRestriction{ID: "r2", Name: "no-x", Policy: "forbid (principal, action, resource);"}, ErrConflict},
		"audit without outcome":         {CmdRecordAudit, RecordAudit{Action: "x", Resource: "y"}, ErrInvalid},
		"revision with another SP":      {CmdAdmitRevision, AdmitRevision{WorkID: "w2", Revision: Revision{ID: "r2", AgentID: "a1", NamespaceID: "ns1", Document: []byte(`{}`), ConfigurationID: "c1", ConfigurationGeneration: 1, Harness: HarnessIdentity{ID: HarnessOpenClaw}, Mode: ModeEmbedded, ServicePrincipalID: "sp1"}}, ErrConflict},
		"agent with a taken SP":         {CmdCreateAgent, CreateAgent{ID: "a2", NamespaceID: "ns1", Name: "bot2", ConfigurationID: "c1", ServicePrincipalID: "sp-bot"}, ErrConflict},
		"agent owning a new SP by name": {CmdCreateAgent, CreateAgent{ID: "a3", NamespaceID: "ns1", Name: "ci", ConfigurationID: "c1", ServicePrincipalID: "sp-new", OwnServicePrincipal: true}, ErrConflict},
	} {
		t.Run(name, func(t *testing.T) {
			before := m.Digest()
			b, err := Encode(tc.typ.Name(), at, "bootstrap", tc.p)
			require.NoError(t, err)
			_, err = m.ApplyBytes(b)
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, before, m.Digest())
		})
	}
}

func TestDeletionRemovesOwnedServicePrincipal(t *testing.T) {
	m := identityFixture(t)
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	apply := func(typ Named, p any) {
		t.Helper()
		b, err := Encode(typ.Name(), at, "bootstrap", p)
		require.NoError(t, err)
		_, err = m.ApplyBytes(b)
		require.NoError(t, err, typ)
	}
	apply(CmdRequestDelete, RequestDelete{AgentID: "a1", WorkID: "d1"})
	apply(CmdClaimWork, ClaimWork{WorkID: "d1", Owner: "o", LeaseExpiry: at.Add(time.Minute)})
	apply(CmdCompleteDeletion, CompleteDeletion{ClaimRef: ClaimRef{WorkID: "d1", Owner: "o"}})
	_, ok := m.ServicePrincipal("sp-bot")
	require.False(t, ok, "the Agent's own service principal goes with it")
	_, ok = m.ServicePrincipal("sp1")
	require.True(t, ok, "a standalone one stays")
}
