package state

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
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

// TestClaimableNMatchesTheOrder: on random queues (several items per Agent,
// live and lapsed claims, items not yet available or out of attempts) the
// bounded scan returns exactly what sorting the whole queue and taking each
// Agent's first item gives.
func TestClaimableNMatchesTheOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	now := t0.Add(time.Hour)
	for round := range 200 {
		m := NewMachine()
		for i := range 1 + rng.IntN(60) {
			w := Work{ID: fmt.Sprintf("w%03d", i), AgentID: fmt.Sprintf("a%d", rng.IntN(12)), State: WorkQueued,
				MaxAttempts: 3, Attempts: rng.IntN(4),
				AvailableAt: now.Add(time.Duration(rng.IntN(20)-15) * time.Minute), CreatedAt: t0.Add(time.Duration(rng.IntN(5)) * time.Second)}
			if rng.IntN(5) == 0 {
				w.State, w.LeaseExpiry = WorkClaimed, now.Add(time.Duration(rng.IntN(20)-10)*time.Minute)
			}
			m.d.work[w.ID], m.d.open[w.ID] = w, true
		}
		// the reference: every claimable item sorted, each Agent's first
		busy := map[string]bool{}
		var cands []Work
		for _, w := range m.d.work {
			if w.State == WorkClaimed && !now.After(w.LeaseExpiry) {
				busy[w.AgentID] = true
			}
		}
		for _, w := range m.d.work {
			ready := (w.State == WorkQueued && !w.AvailableAt.After(now)) || (w.State == WorkClaimed && now.After(w.LeaseExpiry))
			if ready && w.Attempts < w.MaxAttempts && !busy[w.AgentID] {
				cands = append(cands, w)
			}
		}
		slices.SortFunc(cands, func(a, b Work) int {
			return cmp.Or(a.AvailableAt.Compare(b.AvailableAt), a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
		})
		var want []Work
		for _, w := range cands {
			if !busy[w.AgentID] {
				busy[w.AgentID] = true
				want = append(want, w)
			}
		}
		for _, limit := range []int{0, 1, 2, 5, 16} {
			exp := want
			if limit > 0 && limit < len(want) {
				exp = want[:limit]
			}
			got := m.ClaimableN(now, limit)
			require.Equal(t, len(exp), len(got), "round %d limit %d", round, limit)
			for i := range exp {
				require.Equal(t, exp[i].ID, got[i].ID, "round %d limit %d item %d", round, limit, i)
			}
		}
	}
}
