package memory

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

// TestCredentialStore: the memory driver keeps each Namespace's sources
// apart, resolves a reference in its revision's Namespace only, reads the
// locations a test sets and injects faults like every other operation.
func TestCredentialStore(t *testing.T) {
	d := New(DefaultCapabilities())
	ctx := context.Background()
	store := compute.StoreOf(d)
	team, other := state.Namespace{ID: "ns-team"}, state.Namespace{ID: "ns-other"}
	require.NoError(t, store.PutCredential(ctx, team, "model", 1, map[string][]byte{"value": []byte("sk-team")}))
	require.NoError(t, store.PutCredential(ctx, other, "model", 1, map[string][]byte{"value": []byte("sk-other")}))
	v, version, ok := d.Credential("ns-team", "model")
	require.True(t, ok)
	require.Equal(t, int64(1), version)
	require.Equal(t, "sk-team", string(v["value"]))
	got, err := d.Resolve(ctx, state.Revision{NamespaceID: "ns-team", HarnessAuth: &state.HarnessAuth{Method: "api_key",
		SourceRef: "credential:other/model"}})
	require.NoError(t, err)
	require.Equal(t, "sk-team", string(got[contract.SecretModelAPIKey]), "the revision's own Namespace only")

	d.Fail(OpPutCredential, "ns-team/model", 1, nil)
	require.ErrorIs(t, store.PutCredential(ctx, team, "model", 2, map[string][]byte{"value": []byte("sk-2")}), ErrInjected)
	_, version, _ = d.Credential("ns-team", "model")
	require.Equal(t, int64(1), version, "a failed write changes nothing")

	require.NoError(t, store.DeleteCredential(ctx, team, "model"))
	_, _, ok = d.Credential("ns-team", "model")
	require.False(t, ok)
	_, _, ok = d.Credential("ns-other", "model")
	require.True(t, ok)

	d.SetLocation("memory:legacy", map[string][]byte{"k": []byte("sk-legacy")})
	d.SetLocation("memory:refused", nil)
	vals, err := store.ReadLocation(ctx, team, "memory:legacy")
	require.NoError(t, err)
	require.Equal(t, "sk-legacy", string(vals["k"]))
	_, err = store.ReadLocation(ctx, team, "memory:refused")
	require.ErrorIs(t, err, compute.ErrLocationRefused)
	_, err = store.ReadLocation(ctx, team, "memory:none")
	require.ErrorIs(t, err, compute.ErrLocationNotFound)
	require.Equal(t, []string{"ns-team/model", "ns-other/model", "ns-team/model"}, d.CallsOf(OpPutCredential))
}
