package state

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// A Namespace quota is set, audited with its bounds, survives a snapshot
// and is removed by an empty one; the Agent's resources are frozen into
// each revision. A state without any writes no "resources" section: its
// Digest is what it was before the section existed.
func TestNamespaceQuotaAndAgentResources(t *testing.T) {
	m, apply := teamMachine(t)
	var err error
	before := m.Digest()
	plain, err := m.MarshalSnapshot()
	require.NoError(t, err)

	_, err = apply(CmdSetNamespaceQuota, SetNamespaceQuota{NamespaceID: "n1", Quota: &NamespaceQuota{Agents: -1}})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = apply(CmdSetNamespaceQuota, SetNamespaceQuota{NamespaceID: "nope", Quota: &NamespaceQuota{Agents: 1}})
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, before, m.Digest(), "a refused quota changes nothing")

	q := NamespaceQuota{Agents: 2, CPU: "4", Memory: "8Gi", Storage: "100Gi"}
	out, err := apply(CmdSetNamespaceQuota, SetNamespaceQuota{NamespaceID: "n1", Quota: &q})
	require.NoError(t, err)
	require.Equal(t, &q, out.(Namespace).Quota)
	ns, _ := m.Namespace("n1")
	require.Equal(t, &q, ns.Quota)
	ns.Quota.Agents = 99
	again, _ := m.Namespace("n1")
	require.Equal(t, int64(2), again.Quota.Agents, "reads are copies")
	au := m.Audit(0, 0)
	last := au[len(au)-1]
	require.Equal(t, AuditNamespaceQuota, last.Action)
	require.Equal(t, map[string]string{"agents": "2", "cpu": "4", "memory": "8Gi", "storage": "100Gi"}, last.Details)

	_, err = apply(CmdPutConfiguration, PutConfiguration{ID: "c1", NamespaceID: "n1", Name: "cfg", Document: json.RawMessage(`{}`)})
	require.NoError(t, err)
	res := &AgentResources{Gateway: ContainerResources{MemoryRequest: "2Gi", MemoryLimit: "3Gi"}}
	_, err = apply(CmdCreateAgent, CreateAgent{ID: "a1", NamespaceID: "n1", Name: "bot", ConfigurationID: "c1", Resources: res})
	require.NoError(t, err)
	a, _ := m.Agent("a1")
	require.Equal(t, res, a.Resources)

	snap, err := m.MarshalSnapshot()
	require.NoError(t, err)
	require.NotEqual(t, plain, snap)
	restored := NewMachine()
	require.NoError(t, restored.RestoreSnapshot(snap))
	require.Equal(t, m.Digest(), restored.Digest())
	rns, _ := restored.Namespace("n1")
	require.Equal(t, &q, rns.Quota)
	ra, _ := restored.Agent("a1")
	require.Equal(t, res, ra.Resources)

	_, err = apply(CmdUpdateAgent, UpdateAgent{AgentID: "a1", Resources: &AgentResources{}})
	require.NoError(t, err)
	a, _ = m.Agent("a1")
	require.Nil(t, a.Resources, "an empty value restores the defaults")
	_, err = apply(CmdSetNamespaceQuota, SetNamespaceQuota{NamespaceID: "n1", Quota: &NamespaceQuota{}})
	require.NoError(t, err)
	ns, _ = m.Namespace("n1")
	require.Nil(t, ns.Quota, "an empty quota removes it")

	// the section is written only while something sets it
	bare := NewMachine()
	require.NoError(t, bare.RestoreSnapshot(plain))
	require.Equal(t, before, bare.Digest())
}
