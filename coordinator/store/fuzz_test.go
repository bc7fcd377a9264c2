package store

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/state"
)

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// FuzzRestore feeds arbitrary bytes to the snapshot decoder and the FSM's
// Restore: either they fail with ErrInvalidBackup leaving the FSM as it was,
// or they succeed and re-encode to an equivalent snapshot.
func FuzzRestore(f *testing.F) {
	seed := newFSM()
	b, _ := state.Encode(state.CmdCreateNamespace.Name(), t0, "a", state.CreateNamespace{ID: "ns1", Name: "one"})
	seed.Apply(&raft.Log{Index: 1, Data: b})
	seed.Apply(&raft.Log{Index: 2, Data: append([]byte{metaPrefix}, `{"op":"set","id":"n1","httpAddr":"127.0.0.1:1"}`...)})
	good, err := seed.encode()
	require.NoError(f, err)
	f.Add(good)
	f.Add([]byte(snapshotMagic))
	f.Add([]byte(snapshotMagic + "\x00\x00\x00\x02{}"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		fsm := newFSM()
		before := fsm.Machine().Digest()
		err := fsm.Restore(io.NopCloser(bytes.NewReader(in)))
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidBackup)
			require.Equal(t, before, fsm.Machine().Digest())
			return
		}
		out, err := fsm.encode()
		require.NoError(t, err)
		again := newFSM()
		require.NoError(t, again.Restore(io.NopCloser(bytes.NewReader(out))))
		require.Equal(t, fsm.Machine().Digest(), again.Machine().Digest())
	})
}

// FuzzApplyMeta: a node-metadata entry either applies or fails closed; it
// never panics and never touches the state machine.
func FuzzApplyMeta(f *testing.F) {
	f.Add([]byte(`{"op":"set","id":"n1","httpAddr":"127.0.0.1:1"}`))
	f.Add([]byte(`{"op":"replace","nodes":{"a":"b"}}`))
	f.Add([]byte(`{"op":"delete","id":"n1"}`))
	f.Add([]byte(`{"op":"bogus"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		fsm := newFSM()
		before := fsm.Machine().Digest()
		r := fsm.Apply(&raft.Log{Index: 1, Data: append([]byte{metaPrefix}, in...)}).(applyResult)
		if r.err != nil {
			require.ErrorIs(t, r.err, ErrInvalidMember)
		}
		require.Equal(t, before, fsm.Machine().Digest())
	})
}
