package clustertest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
)

const deployAgents = 200

// TestClusterDeploysThroughLeaderKills deploys 200 Agents through the API of
// a three-process cluster while the leader is SIGKILLed twice (and
// restarted), then checks the activation invariants on every member, and
// that a full SIGKILL + restart of all three from disk yields the same state.
func TestClusterDeploysThroughLeaderKills(t *testing.T) {
	c := startCluster(t, clusterOpts{size: 3, ipBase: 60})
	ctx := context.Background()
	names := c.setupWorkload(ctx, t, deployAgents)

	// The leader is killed once a third and again once two thirds of the
	// deploys have been answered; the deploys keep going meanwhile.
	marks := []int64{deployAgents / 3, 2 * deployAgents / 3}
	reached := []chan struct{}{make(chan struct{}), make(chan struct{})}
	var deployed atomic.Int64
	deployErr := make(chan error, 1)
	go func() {
		deployErr <- parallelErr(names, 8, func(name string) error {
			_, err := c.deploy(ctx, name)
			n := deployed.Add(1)
			for i, m := range marks {
				if n == m {
					close(reached[i])
				}
			}
			return err
		})
	}()
	var killed []string
	for i := range marks {
		select {
		case <-reached[i]:
		case <-time.After(clusterWait):
			t.Fatalf("deploys stalled before %d", marks[i])
		}
		leader := c.waitLeader(c.Nodes)
		leader.kill()
		killed = append(killed, fmt.Sprintf("%s at %d/%d deploys answered", leader.ID, deployed.Load(), deployAgents))
		var rest []*node
		for _, n := range c.Nodes {
			if n != leader {
				rest = append(rest, n)
			}
		}
		require.NotEqual(t, leader.ID, c.waitLeader(rest).ID)
		c.start(leader)
	}
	require.NoError(t, <-deployErr)
	require.Len(t, killed, 2, "the leader was killed twice")
	t.Logf("killed leaders: %v", killed)

	leader := c.waitMembers(c.Nodes)
	c.awaitState(ctx, t, leader, snapshotOf.unsettled) // every deploy activated
	digest := c.converged(c.Nodes)
	for _, n := range c.Nodes {
		c.read(ctx, t, n).checkInvariants(t, deployAgents)
	}

	// A full restart of all three from disk yields identical state.
	for _, n := range c.Nodes {
		n.kill()
	}
	for _, n := range c.Nodes {
		c.start(n)
	}
	c.waitMembers(c.Nodes)
	require.Equal(t, digest, c.converged(c.Nodes), "state after a full restart from disk")
	c.read(ctx, t, c.Nodes[0]).checkInvariants(t, deployAgents)
}

// TestPartitionedLeaderCompletesNoActivation isolates the leader behind the
// Raft proxies while it has activations in flight: the deposed leader's
// writes fail, every activation it did not commit before the cut is done by
// the new leader, and after healing every member agrees.
func TestPartitionedLeaderCompletesNoActivation(t *testing.T) {
	c := startCluster(t, clusterOpts{size: 3, proxied: true, ipBase: 70})
	ctx := context.Background()
	const agents = 60
	names := c.setupWorkload(ctx, t, agents)
	old := c.waitLeader(c.Nodes)
	oldCl := c.client(old)

	// Deploy half straight to the leader, then cut it off while its engine
	// is working through them.
	for _, name := range names[:agents/2] {
		_, err := oldCl.Deploy(ctx, workloadNS, name, wire.Deploy{})
		require.NoError(t, err)
	}
	c.isolate(old)
	// Taken after the cut: anything the old leader stamps later cannot commit.
	cut := time.Now()

	var rest []*node
	for _, n := range c.Nodes {
		if n != old {
			rest = append(rest, n)
		}
	}
	leader := c.waitLeader(rest)
	require.NotEqual(t, old.ID, leader.ID)

	// The deposed leader accepts no write: it cannot reach a quorum.
	direct := c.clientTo(old.HTTPAddr, c.Token, &http.Client{Timeout: 15 * time.Second})
	_, err := direct.Deploy(ctx, workloadNS, names[agents/2], wire.Deploy{})
	require.Error(t, err, "a write on the isolated leader must fail")

	// The majority finishes everything, including the rest of the Agents.
	newCl := c.client(leader)
	for _, name := range names[agents/2:] {
		_, err := newCl.Deploy(ctx, workloadNS, name, wire.Deploy{})
		require.NoError(t, err)
	}
	s := c.awaitState(ctx, t, leader, snapshotOf.unsettled)
	s.checkInvariants(t, agents)

	// Every activation the old leader's engine reported done was committed,
	// and was proposed before the cut (entries carry the proposing leader's
	// clock): the deposed leader completed no activation.
	auditByWork := map[string]wire.AuditRecord{}
	for _, r := range s.audit {
		if r.Action == wire.AuditActivate {
			auditByWork[r.Details["workId"]] = r
		}
	}
	oldDone := old.loggedWork(t, "revision activated")
	require.NotEmpty(t, oldDone, "the old leader activated some revisions before the cut")
	for _, w := range oldDone {
		r, ok := auditByWork[w]
		require.True(t, ok, "work %s the old leader logged as activated is not committed", w)
		require.True(t, r.Time.Before(cut), "work %s completed by the deposed leader at %s, after the cut at %s", w, r.Time, cut)
	}
	afterCut := 0
	for _, r := range auditByWork {
		if r.Time.After(cut) {
			afterCut++
		}
	}
	require.Positive(t, afterCut, "the new leader completed activations after the cut")
	// While cut off, the old member's state never saw the majority's
	// progress: it refuses default reads, and its stale view shows less.
	_, err = c.client(old).Agents(ctx, workloadNS)
	require.ErrorContains(t, err, "NOT_READY")
	oldView := c.read(client.WithReadOptions(ctx, client.ReadOptions{Stale: true}), t, old)
	require.Less(t, len(activated(oldView)), len(activated(s)))
	require.Positive(t, scrapeCounter(t, c, old, "oce_store_propose_failures_total"), "the deposed leader's proposals failed")

	c.heal()
	c.waitMembers(c.Nodes)
	c.converged(c.Nodes)
	c.read(ctx, t, old).checkInvariants(t, agents)
}

func activated(s snapshotOf) []string {
	var ids []string
	for _, r := range s.audit {
		if r.Action == wire.AuditActivate {
			ids = append(ids, r.RevisionID)
		}
	}
	return ids
}

// scrapeCounter reads one metric of a member's /metrics.
func scrapeCounter(t testing.TB, c *cluster, n *node, name string) float64 {
	t.Helper()
	hc, scheme := c.httpClient()
	req, err := http.NewRequest(http.MethodGet, scheme+n.HTTPAddr+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+" ") {
			var v float64
			_, err := fmt.Sscanf(strings.TrimPrefix(line, name+" "), "%g", &v)
			require.NoError(t, err)
			return v
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

// TestGracefulStopHandsOffLeadership: SIGTERM on the leader transfers
// leadership before the process exits 0, and the cluster keeps serving
// writes; the stopped member rejoins from its own data on restart.
func TestGracefulStopHandsOffLeadership(t *testing.T) {
	c := startCluster(t, clusterOpts{size: 3, ipBase: 110})
	ctx := context.Background()
	c.setupWorkload(ctx, t, 3)
	old := c.waitLeader(c.Nodes)
	old.stop()
	require.Equal(t, 0, old.exitCode())
	require.True(t, old.logged(t, "coordinator stopped"))
	require.False(t, old.logged(t, "leadership hand-off skipped"), "leadership was handed off")

	var rest []*node
	for _, n := range c.Nodes {
		if n != old {
			rest = append(rest, n)
		}
	}
	leader := c.waitLeader(rest)
	require.True(t, leader.logged(t, "leadership acquired"))
	_, err := c.deploy(ctx, "agent-0000")
	require.NoError(t, err)

	c.start(old)
	c.waitMembers(c.Nodes)
	c.converged(c.Nodes)
}

// TestBackupRestoreThroughAPI: a backup taken through a follower's API (the
// client follows NOT_LEADER to the leader) restores the whole cluster to
// that state; a corrupt upload is refused and changes nothing.
func TestBackupRestoreThroughAPI(t *testing.T) {
	c := startCluster(t, clusterOpts{size: 3, ipBase: 120})
	ctx := context.Background()
	names := c.setupWorkload(ctx, t, 4)
	leader := c.waitLeader(c.Nodes)
	var follower *node
	for _, n := range c.Nodes {
		if n != leader {
			follower = n
		}
	}
	var backup bytes.Buffer
	_, err := c.client(follower).SnapshotSave(ctx, &backup)
	require.NoError(t, err)
	want := c.converged(c.Nodes)

	for _, n := range names {
		_, err := c.deploy(ctx, n)
		require.NoError(t, err)
	}
	// The leader's health watcher records each Agent's observed readiness
	// after its activation, and later only what changes: once it has seen
	// every Agent serving, nothing moves the state but requests. So "a
	// refused restore changes nothing" compares the whole replicated state.
	c.awaitState(ctx, t, leader, snapshotOf.notServing)
	changed := c.converged(c.Nodes)
	require.NotEqual(t, want, changed)

	_, err = c.client(leader).SnapshotRestore(ctx, bytes.NewReader([]byte("OCESNAP1 garbage")))
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusBadRequest, ae.Status)
	require.Equal(t, changed, c.converged(c.Nodes), "a refused restore changes nothing")

	_, err = c.client(follower).SnapshotRestore(ctx, bytes.NewReader(backup.Bytes()))
	require.NoError(t, err)
	c.applied = 0 // a restore rewinds the applied state to the backup's
	// The backup's state plus the restore's own audit record, on every member.
	require.NotEqual(t, want, c.converged(c.Nodes))
	restores, err := c.client(leader).AuditQuery(ctx, client.AuditFilter{Action: "oce.cluster.restore"})
	require.NoError(t, err)
	require.Len(t, restores, 1)
	require.Equal(t, "bootstrap", restores[0].Actor)
	for _, a := range c.read(ctx, t, follower).agents {
		require.Empty(t, a.ActiveRevisionID, "restored to the pre-deploy state")
	}
}
