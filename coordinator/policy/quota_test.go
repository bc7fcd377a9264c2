package policy_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/policy"
	"oce.dev/oce/coordinator/state"
)

// WithinQuota counts the Namespace's other Agents as the quota says: an
// Agent never deployed holds nothing; a deployed one holds its claims
// (agents, storage) and, while its revision is pending or active, its
// limits (cpu, memory) — a dedicated one its Harness's too; the deploying
// Agent counts once, with the new revision's footprint; the refusal names
// the first bound passed.
func TestWithinQuota(t *testing.T) {
	f := newFixture(t)
	f.apply(state.CmdCreateAgent, state.CreateAgent{ID: "a2", NamespaceID: "nsa", Name: "two", ConfigurationID: "c1",
		ServicePrincipalID: "sp-two", OwnServicePrincipal: true})
	rev := func(id, agent, mode string, res *state.AgentResources) state.Revision {
		h := state.HarnessOpenClaw
		if mode == state.ModeDedicated {
			h = state.HarnessCodex
		}
		return state.Revision{ID: id, AgentID: agent, NamespaceID: "nsa", ConfigurationID: "c1", ConfigurationGeneration: 1,
			Mode: mode, Harness: state.HarnessIdentity{ID: h}, Resources: res, Document: []byte(`{}`)}
	}
	d := policy.Decider{State: f.m}
	quota := func(q state.NamespaceQuota) state.Namespace {
		f.apply(state.CmdSetNamespaceQuota, state.SetNamespaceQuota{NamespaceID: "nsa", Quota: &q})
		ns, _ := f.m.Namespace("nsa")
		return ns
	}
	a1, _ := f.m.Agent("a1")
	a2, _ := f.m.Agent("a2")
	next := rev("r2", "a2", state.ModeEmbedded, nil)

	// nothing deployed yet: only the new revision counts
	require.NoError(t, d.WithinQuota(quota(state.NamespaceQuota{Agents: 1, CPU: "2", Memory: "3Gi", Storage: "10Gi"}), a2, next))
	over := &policy.OverQuota{}
	require.ErrorAs(t, d.WithinQuota(quota(state.NamespaceQuota{Memory: "2Gi"}), a2, next), &over)
	require.Equal(t, "memory", over.Quota)
	require.Equal(t, "3Gi", over.Requested)

	// a1 deployed (pending): its claims and limits count
	r1 := rev("r1", "a1", state.ModeEmbedded, nil)
	r1.ServicePrincipalID = "sp-bot"
	f.apply(state.CmdAdmitRevision, state.AdmitRevision{Revision: r1, WorkID: "w1"})
	err := d.WithinQuota(quota(state.NamespaceQuota{Agents: 1}), a2, next)
	require.ErrorAs(t, err, &over)
	require.Equal(t, policy.OverQuota{Namespace: "a", Quota: "agents", Limit: "1", Used: "1", Requested: "1"}, *over)
	require.ErrorContains(t, err, `namespace "a" quota agents is 1`)
	require.NoError(t, d.WithinQuota(quota(state.NamespaceQuota{Agents: 1}), a1, rev("r9", "a1", state.ModeEmbedded, nil)),
		"the deploying Agent counts once")
	require.ErrorAs(t, d.WithinQuota(quota(state.NamespaceQuota{CPU: "3"}), a2, next), &over)
	require.Equal(t, "cpu", over.Quota)
	require.Equal(t, "2", over.Used)
	small := rev("r2", "a2", state.ModeEmbedded, &state.AgentResources{Gateway: state.ContainerResources{CPULimit: "500m"}})
	require.NoError(t, d.WithinQuota(quota(state.NamespaceQuota{CPU: "2500m"}), a2, small), "the Agent's own limit counts")
	dedicated := rev("r2", "a2", state.ModeDedicated, nil)
	require.ErrorAs(t, d.WithinQuota(quota(state.NamespaceQuota{Storage: "50Gi"}), a2, dedicated), &over)
	require.Equal(t, "storage", over.Quota)
	require.Equal(t, "50Gi", over.Requested, "a dedicated Agent's state and workspace claims")
	require.Equal(t, "10Gi", over.Used)

	// a1 stopped (no active revision, nothing pending): claims only
	f.apply(state.CmdClaimWork, state.ClaimWork{WorkID: "w1", Owner: "e", LeaseExpiry: t0.Add(time.Hour)})
	f.apply(state.CmdSetRevisionStatus, state.SetRevisionStatus{ClaimRef: state.ClaimRef{WorkID: "w1", Owner: "e"},
		RevisionID: "r1", Status: state.RevisionStopped})
	require.NoError(t, d.WithinQuota(quota(state.NamespaceQuota{CPU: "2", Memory: "3Gi"}), a2, next))
	require.ErrorAs(t, d.WithinQuota(quota(state.NamespaceQuota{Storage: "15Gi"}), a2, next), &over)
	require.Equal(t, "storage", over.Quota)
}
