package store

import (
	"bytes"
	"io"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/state"
)

func metaEntry(js string) []byte { return append([]byte{metaPrefix}, js...) }

func TestFSMMetaAndSnapshot(t *testing.T) {
	f := newFSM()
	for i, tc := range []struct {
		entry   []byte
		wantErr error
	}{
		{metaEntry(`{"op":"set","id":"n1","httpAddr":"h1"}`), nil},
		{metaEntry(`{"op":"set","id":"n2","httpAddr":"h2"}`), nil},
		{metaEntry(`{"op":"delete","id":"n2"}`), nil},
		{metaEntry(`{"op":"frobnicate"}`), ErrInvalidMember},
		{metaEntry(`not json`), ErrInvalidMember},
		{[]byte(`{"type":"Nope","time":"2026-11-29T09:00:00Z","payload":{}}`), state.ErrInvalid},
	} {
		r := f.Apply(&raft.Log{Index: uint64(i + 1), Data: tc.entry}).(applyResult)
		if tc.wantErr == nil {
			require.NoError(t, r.err, i)
		} else {
			require.ErrorIs(t, r.err, tc.wantErr, i)
		}
	}
	b, _ := state.Encode(state.CmdCreateNamespace.Name(), t0, "a", state.CreateNamespace{ID: "ns1", Name: "one"})
	r := f.Apply(&raft.Log{Index: 7, Data: b}).(applyResult)
	require.NoError(t, r.err)
	require.Equal(t, "ns1", r.val.(state.Namespace).ID)
	require.Equal(t, map[string]string{"n1": "h1"}, f.nodesCopy())
	idx, digest := f.digest()
	require.Equal(t, uint64(7), idx)

	snap, err := f.Snapshot()
	require.NoError(t, err)
	p := snap.(partsSnapshot)
	raw := append(append([]byte{}, p.head...), p.body...)

	// Restore replaces content in place: the Machine object and its waiters stay.
	g := newFSM()
	m := g.Machine()
	changed := m.Changed()
	require.NoError(t, g.Restore(io.NopCloser(bytes.NewReader(raw))))
	require.Same(t, m, g.Machine())
	select {
	case <-changed:
	default:
		t.Fatal("restore did not signal Changed")
	}
	gi, gd := g.digest()
	require.Equal(t, idx, gi)
	require.Equal(t, digest, gd)
	require.Equal(t, "h1", g.httpAddr("n1"))
}
