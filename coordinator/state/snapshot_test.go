package state

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// marshalJSONv1 renders data the way version 1 did (for the compatibility
// test).
func marshalJSONv1(t testing.TB, m *Machine) []byte {
	values := func(mp any) any {
		v := reflect.ValueOf(mp)
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return compareStr(a.String(), b.String()) })
		out := reflect.MakeSlice(reflect.SliceOf(v.Type().Elem()), 0, len(keys))
		for _, k := range keys {
			out = reflect.Append(out, v.MapIndex(k))
		}
		return out.Interface()
	}
	d := m.d
	s := snapshotJSON{Version: snapshotVersionJSON,
		Namespaces: values(d.namespaces).([]Namespace), Configurations: values(d.configurations).([]Configuration),
		Agents: values(d.agents).([]Agent), Revisions: values(d.revisions).([]Revision), Work: values(d.work).([]Work),
		PredecessorStops: values(d.stops).([][]PredecessorStop), Audit: d.audit, AuditSeq: d.auditSeq,
		Installation: d.installation}
	if s.Audit == nil {
		s.Audit = []AuditRecord{}
	}
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return b
}

func compareStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestRestoreJSONVersion1 restores a snapshot written by the JSON encoding
// of earlier releases into the same state.
func TestRestoreJSONVersion1(t *testing.T) {
	src := NewMachine()
	applyAll(src, randomEntries(t, 7, 1500))
	src.d.idem = idempotency{} // version 1 predates idempotency records
	old := marshalJSONv1(t, src)
	dst := NewMachine()
	require.NoError(t, dst.RestoreSnapshot(old))
	// Version 1 predates the activation section: it restores everything
	// else, and the section empty.
	src.d.act = newActivation()
	require.Equal(t, src.Digest(), dst.Digest())
	for _, a := range src.Agents("") {
		require.Equal(t, src.Revisions(a.ID), dst.Revisions(a.ID))
	}
}

// TestRestoreRejectsCorruptBinary: every truncation and a duplicate name
// fail with ErrInvalid and leave the state as it was.
func TestRestoreRejectsCorruptBinary(t *testing.T) {
	f := newFx(t)
	f.activated()
	snap, err := f.m.MarshalSnapshot()
	require.NoError(t, err)
	g := newFx(t)
	before := g.m.Digest()
	for i := len(snapMagic); i < len(snap); i++ {
		require.ErrorIs(t, g.m.RestoreSnapshot(snap[:i]), ErrInvalid, "truncated at %d", i)
	}
	require.ErrorIs(t, g.m.RestoreSnapshot(append(slices.Clone(snap), 0)), ErrInvalid, "trailing byte")
	d := newData()
	d.putNamespace(Namespace{ID: "n1", Name: "same"})
	d.namespaces["n2"] = Namespace{ID: "n2", Name: "same"}
	require.ErrorIs(t, g.m.RestoreSnapshot(d.marshal()), ErrInvalid, "duplicate namespace name")
	require.Equal(t, before, g.m.Digest())
}

// TestNameIndexes follows names through create, rename, delete and restore.
func TestNameIndexes(t *testing.T) {
	f := newFx(t)
	ns, ok := f.m.NamespaceByName("two")
	require.True(t, ok)
	require.Equal(t, "ns2", ns.ID)
	a, ok := f.m.AgentByName("ns1", "bot")
	require.True(t, ok)
	require.Equal(t, "a1", a.ID)
	_, ok = f.m.AgentByName("ns2", "bot")
	require.False(t, ok)
	f.must(CmdCreateAgent, CreateAgent{ID: "a2", NamespaceID: "ns2", Name: "bot", ConfigurationID: "c2"})
	_, err := f.apply(CmdCreateAgent, CreateAgent{ID: "a3", NamespaceID: "ns2", Name: "bot", ConfigurationID: "c2"})
	require.ErrorIs(t, err, ErrConflict)
	require.Len(t, f.m.Agents("ns2"), 1)

	// A replacement may rename a configuration; the old name is free again.
	f.must(CmdPutConfiguration, PutConfiguration{ID: "c1", NamespaceID: "ns1", Name: "renamed", Document: json.RawMessage(`{}`)})
	_, ok = f.m.ConfigurationByName("ns1", "cfg")
	require.False(t, ok)
	c, ok := f.m.ConfigurationByName("ns1", "renamed")
	require.True(t, ok)
	require.Equal(t, int64(2), c.Generation)
	f.must(CmdPutConfiguration, PutConfiguration{ID: "c9", NamespaceID: "ns1", Name: "cfg", Document: json.RawMessage(`{}`)})

	// Deletion frees the name.
	f.must(CmdRequestDelete, RequestDelete{AgentID: "a2", WorkID: "wd"})
	f.claim("wd", "o")
	f.must(CmdCompleteDeletion, CompleteDeletion{ClaimRef: ref("wd", "o")})
	_, ok = f.m.AgentByName("ns2", "bot")
	require.False(t, ok)
	require.Empty(t, f.m.Agents("ns2"))

	snap, err := f.m.MarshalSnapshot()
	require.NoError(t, err)
	g := NewMachine()
	require.NoError(t, g.RestoreSnapshot(snap))
	for _, m := range []*Machine{f.m, g} {
		a, ok := m.AgentByName("ns1", "bot")
		require.True(t, ok)
		require.Equal(t, "a1", a.ID)
		c, ok := m.ConfigurationByName("ns1", "cfg")
		require.True(t, ok)
		require.Equal(t, "c9", c.ID)
		require.Equal(t, []Agent{a}, m.Agents("ns1"))
	}
	f.must(CmdCreateAgent, CreateAgent{ID: "a4", NamespaceID: "ns2", Name: "bot", ConfigurationID: "c2"})
}

// FuzzRestoreSnapshot: arbitrary bytes (binary version 2 or JSON version 1)
// either fail with ErrInvalid leaving the state as it was, or restore into a
// state that re-encodes losslessly.
func FuzzRestoreSnapshot(f *testing.F) {
	src := NewMachine()
	applyAll(src, randomEntries(f, 5, 60))
	bin, err := src.MarshalSnapshot()
	require.NoError(f, err)
	f.Add(bin)
	f.Add(marshalJSONv1(f, src))
	f.Add([]byte(snapMagic))
	f.Fuzz(func(t *testing.T, in []byte) {
		fx := newFx(t)
		before := fx.m.Digest()
		if err := fx.m.RestoreSnapshot(in); err != nil {
			require.ErrorIs(t, err, ErrInvalid)
			require.Equal(t, before, fx.m.Digest())
			return
		}
		out, err := fx.m.MarshalSnapshot()
		require.NoError(t, err)
		again := NewMachine()
		require.NoError(t, again.RestoreSnapshot(out))
		out2, err := again.MarshalSnapshot()
		require.NoError(t, err)
		require.Equal(t, out, out2)
	})
}
