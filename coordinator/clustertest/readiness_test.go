package clustertest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
	"oce.dev/oce/coordinator/store"
	"oce.dev/oce/internal/poll"
	"oce.dev/oce/shared/codes"
)

// readyz asks a member's /readyz once; ok with the applied index it reported.
func (c *cluster) readyz(n *node) (bool, uint64) {
	hc, scheme := c.httpClient()
	resp, err := hc.Get(scheme + n.HTTPAddr + "/readyz")
	if err != nil {
		return false, 0
	}
	defer resp.Body.Close()
	var body struct {
		AppliedIndex uint64 `json:"appliedIndex"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
		return false, 0
	}
	return true, body.AppliedIndex
}

// TestLaggingMemberIsNotReady: a follower cut off while the cluster commits
// well over ReadyMaxLag entries, then healed, reports ready only once its
// state is within the lag of the leader's commit index — never while it is
// far behind (it used to: Raft caps a follower's commit index at its own
// last log index); a follower restarted behind never answers NOT_FOUND for
// an Agent that exists.
func TestLaggingMemberIsNotReady(t *testing.T) {
	c := startCluster(t, clusterOpts{size: 3, proxied: true, ipBase: 210})
	ctx := context.Background()
	names := c.setupWorkload(ctx, t, 40)
	leader := c.waitLeader(c.Nodes)
	follower := c.followerOf(leader)
	c.converged(c.Nodes)
	require.Eventually(t, func() bool { ok, _ := c.readyz(follower); return ok }, clusterWait, pollEvery)

	behind := func() uint64 {
		// Deploys of 40 Agents, each six entries with its activation,
		// until the cluster is well past ReadyMaxLag entries ahead.
		start, err := c.info(ctx, leader)
		require.NoError(t, err)
		for round := 0; ; round++ {
			parallel(t, names, 8, func(name string) error {
				_, err := c.client(leader).Deploy(ctx, workloadNS, name, wire.Deploy{})
				return err
			})
			info, err := c.info(ctx, leader)
			require.NoError(t, err)
			if info.CommitIndex > start.CommitIndex+2*store.ReadyMaxLag {
				c.awaitState(ctx, t, leader, snapshotOf.unsettled)
				info, err = c.info(ctx, leader)
				require.NoError(t, err)
				return info.CommitIndex
			}
		}
	}

	// Cut off: not ready (no fresh commit index from the leader).
	c.isolate(follower)
	require.Eventually(t, func() bool { ok, _ := c.readyz(follower); return !ok }, clusterWait, pollEvery)
	commit := behind()
	c.heal()
	sawNotReady := false
	poll.Until(t, func() bool {
		ok, applied := c.readyz(follower)
		if !ok {
			sawNotReady = true
			return false
		}
		require.GreaterOrEqual(t, applied+store.ReadyMaxLag, commit,
			"ready at applied index %d while the cluster had committed %d", applied, commit)
		return true
	}, clusterWait, time.Millisecond, "the healed follower ready")
	require.True(t, sawNotReady)

	// Restarted behind: the member replays its log before serving, and no
	// read in between claims that an Agent does not exist.
	follower.kill()
	commit = behind()
	_, err := c.client(leader).CreateAgent(ctx, workloadNS, wire.CreateAgent{Name: "late", Configuration: "cfg",
		HarnessAuth: &wire.HarnessAuth{Method: "api_key", CredentialKind: "secret", SourceRef: "secret://load/model#key"}})
	require.NoError(t, err)
	c.start(follower)
	probe := c.probe(follower)
	served := 0
	poll.Until(t, func() bool {
		for _, name := range []string{names[0], "late"} {
			_, err := probe.Agent(ctx, workloadNS, name)
			var ae *client.Error
			switch {
			case err == nil:
				served++
			case errors.As(err, &ae) && ae.Code == codes.NotFound:
				t.Fatalf("the restarted member answered NOT_FOUND for %s, which exists: %v", name, err)
			}
		}
		if ok, applied := c.readyz(follower); ok {
			require.GreaterOrEqual(t, applied+store.ReadyMaxLag, commit, "ready while far behind")
			return served > 0
		}
		return false
	}, clusterWait, time.Millisecond, "the restarted follower ready")
	t.Logf("restarted member: %d reads served before it was ready", served)
	c.converged(c.Nodes)
}
