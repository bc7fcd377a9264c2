package state

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClaimableNLimit: the limited form returns the prefix of Claimable.
func TestClaimableNLimit(t *testing.T) {
	f := newFx(t)
	for _, a := range []string{"a2", "a3"} {
		f.must(CmdCreateAgent, CreateAgent{ID: a, NamespaceID: "ns1", Name: "bot-" + a, ConfigurationID: "c1"})
	}
	for i, a := range []string{"a3", "a1", "a2"} {
		f.now = t0.Add(time.Duration(i) * time.Second)
		f.must(CmdAdmitRevision, AdmitRevision{Revision: rev("r-"+a, a, 1), WorkID: "w-" + a})
	}
	now := t0.Add(time.Minute)
	all := f.m.Claimable(now)
	require.Equal(t, []string{"w-a3", "w-a1", "w-a2"}, []string{all[0].ID, all[1].ID, all[2].ID})
	for limit := range 5 {
		want := all
		if limit > 0 && limit < len(all) {
			want = all[:limit]
		}
		require.Equal(t, want, f.m.ClaimableN(now, limit), "limit %d", limit)
	}
}
