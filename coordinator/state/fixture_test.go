package state

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// fx drives a Machine with entries stamped at a controllable time.
type fx struct {
	t   *testing.T
	m   *Machine
	now time.Time
}

func (f *fx) apply(typ Named, p any) (any, error) {
	b, err := Encode(typ.Name(), f.now, "alice", p)
	require.NoError(f.t, err)
	return f.m.ApplyBytes(b)
}

func (f *fx) must(typ Named, p any) any {
	f.t.Helper()
	res, err := f.apply(typ, p)
	require.NoError(f.t, err, typ)
	return res
}

// newFx has namespace ns1 (configuration c1 at generation 1, agent a1
// embedded) and namespace ns2.
func newFx(t *testing.T) *fx {
	f := &fx{t: t, m: NewMachine(), now: t0}
	f.must(CmdCreateNamespace, CreateNamespace{ID: "ns1", Name: "one"})
	f.must(CmdCreateNamespace, CreateNamespace{ID: "ns2", Name: "two"})
	f.must(CmdPutConfiguration, PutConfiguration{ID: "c1", NamespaceID: "ns1", Name: "cfg", Document: json.RawMessage(`{"a": 1}`)})
	f.must(CmdPutConfiguration, PutConfiguration{ID: "c2", NamespaceID: "ns2", Name: "cfg", Document: json.RawMessage(`{}`)})
	f.must(CmdCreateAgent, CreateAgent{ID: "a1", NamespaceID: "ns1", Name: "bot", ConfigurationID: "c1"})
	return f
}

func rev(id, agent string, gen int64) Revision {
	return Revision{ID: id, AgentID: agent, NamespaceID: "ns1", Document: json.RawMessage(`{"a":1}`),
		ConfigurationID: "c1", ConfigurationGeneration: gen, Harness: HarnessIdentity{ID: HarnessOpenClaw, Version: "2026.9.6"},
		Mode: ModeEmbedded, ComputeID: "memory"}
}

func (f *fx) admit(revID, workID string) Revision {
	f.t.Helper()
	return f.must(CmdAdmitRevision, AdmitRevision{Revision: rev(revID, "a1", 1), WorkID: workID, MaxAttempts: 3}).(Admitted).Revision
}

func (f *fx) claim(workID, owner string) *ClaimResult {
	f.t.Helper()
	return f.must(CmdClaimWork, ClaimWork{WorkID: workID, Owner: owner, LeaseExpiry: f.now.Add(5 * time.Second)}).(*ClaimResult)
}

func ref(workID, owner string) ClaimRef { return ClaimRef{WorkID: workID, Owner: owner} }

// activated admits r1/w1, claims and activates it fully.
func (f *fx) activated() {
	f.admit("r1", "w1")
	f.claim("w1", "o")
	f.must(CmdActivateRevision, ActivateRevision{ClaimRef: ref("w1", "o"), Expected: ""})
	f.must(CmdCompleteActivation, CompleteActivation{ClaimRef: ref("w1", "o")})
}
