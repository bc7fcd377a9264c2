package clustertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
	"oce.dev/oce/shared/codes"
)

// The history-checked chaos suite (M16): three coordinator processes on
// loopback, concurrent clients deploying and reading through random members,
// leader SIGKILLs and partitions through the Raft proxies, and afterwards:
//
//   - the history of deploys and linearizable (?consistent) reads is checked
//     with porcupine against the Agent register model (history_test.go);
//   - no idempotency key took effect twice, no acknowledged deploy is lost,
//     every Agent has one active revision with one activate audit record;
//   - each client's at-least-index reads (?index = the highest index it has
//     seen, its own writes included) never go backwards;
//   - no read answered NOT_FOUND for an Agent that exists;
//   - every member holds the same state.
//
// CHAOS_DURATION sets how long faults are injected (default chaosDefault,
// the run in make test; make chaos runs longer), CHAOS_SEED replays the
// workload and fault schedule of an earlier run (the seed is printed first).
const (
	chaosDefault    = 45 * time.Second
	chaosAgents     = 6
	chaosClients    = 6
	chaosOpDeadline = 30 * time.Second // a deploy retried this long stays unknown
	chaosRequest    = 5 * time.Second
	chaosCheck      = 2 * time.Minute // porcupine's budget
)

// agentsFor scales the Agents with the run, chaosAgents per chaosDefault of
// faults, so a long run does not pile thousands of revisions on a few Agents
// (every read of them would grow with the run).
func agentsFor(dur time.Duration) int {
	return max(chaosAgents, int(int64(chaosAgents)*int64(dur)/int64(chaosDefault)))
}

func chaosParams(t *testing.T) (uint64, time.Duration) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "CHAOS_SEED")
		seed = s
	}
	dur := chaosDefault
	if v := os.Getenv("CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "CHAOS_DURATION")
		dur = d
	}
	return seed, dur
}

func TestChaos(t *testing.T) {
	seed, dur := chaosParams(t)
	fmt.Fprintf(os.Stderr, "TestChaos: CHAOS_SEED=%d CHAOS_DURATION=%s\n", seed, dur)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay the workload and fault schedule with CHAOS_SEED=%d CHAOS_DURATION=%s", seed, dur)
		}
	})
	c := startCluster(t, clusterOpts{size: 3, proxied: true, ipBase: 160})
	ctx := context.Background()
	names := c.setupWorkload(ctx, t, agentsFor(dur))
	// Every member has applied the Agents before the faults start: from
	// here on a read that does not find one served older state than its
	// member already had (a restarted member replaying its log must not).
	c.converged(c.Nodes)
	h := newHistory()
	stop := time.Now().Add(dur)

	clients := make([]*chaosClient, chaosClients)
	var wg sync.WaitGroup
	for i := range clients {
		cc := &chaosClient{id: i, c: c, h: h, names: names, rng: rand.New(rand.NewPCG(seed, uint64(i)+1)),
			seen: map[string]int64{}, floor: c.applied}
		clients[i] = cc
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc.run(ctx, stop)
		}()
	}
	faults := c.nemesis(t, rand.New(rand.NewPCG(seed, 0)), stop)
	c.heal()
	for _, n := range c.Nodes {
		if !n.running() {
			c.start(n)
		}
	}
	leader := c.waitMembers(c.Nodes)
	wg.Wait()
	final := c.awaitState(ctx, t, leader, snapshotOf.unsettled)
	c.converged(c.Nodes)
	for _, n := range c.Nodes {
		c.read(ctx, t, n).checkInvariants(t, len(names))
	}

	ops := h.operations()
	var deploys, reads, unknown, violations int
	for _, cc := range clients {
		deploys += len(cc.acked)
		reads += cc.reads
		unknown += cc.unknown
		violations += len(cc.violations)
		for _, v := range cc.violations {
			t.Errorf("client %d: %s", cc.id, v)
		}
	}
	t.Logf("chaos: %s of faults (%d): %v", dur, len(faults), faults)
	t.Logf("chaos: %d operations recorded; %d deploys acknowledged, %d unknown; %d at-least-index reads",
		len(ops), deploys, unknown, reads)
	require.Positive(t, deploys, "the workload made progress")
	require.NotEmpty(t, faults, "faults were injected")

	numbers := checkDeploys(t, final, clients)
	checkMonotonic(t, clients, numbers)
	checkLinearizable(t, ops, numbers, seed)
}

// chaosClient is one concurrent client of the workload.
type chaosClient struct {
	id    int
	c     *cluster
	h     *history
	names []string
	rng   *rand.Rand

	floor      uint64           // the highest index seen
	seen       map[string]int64 // per Agent, the highest revision count seen or written
	acked      []ackedDeploy
	unknown    int
	reads      int
	observed   []observation // at-least-index reads, in order
	violations []string
}

type ackedDeploy struct {
	key, agent, revisionID string
	number                 int64
}

type observation struct {
	agent    string
	index    uint64
	count    int64
	activeID string
}

func (cc *chaosClient) member() *node {
	for range 8 {
		if n := cc.c.Nodes[cc.rng.IntN(len(cc.c.Nodes))]; n.running() {
			return n
		}
	}
	return cc.c.Nodes[0]
}

func (cc *chaosClient) client(n *node) *client.Client {
	return cc.c.clientTo(n.HTTPAddr, cc.c.Token, &http.Client{Timeout: chaosRequest}, client.WithRetry(client.Retry{}))
}

func (cc *chaosClient) run(ctx context.Context, stop time.Time) {
	for time.Now().Before(stop) {
		agent := cc.names[cc.rng.IntN(len(cc.names))]
		switch p := cc.rng.IntN(10); {
		case p < 4:
			cc.deploy(ctx, agent)
		case p < 7:
			cc.consistentRead(ctx, agent)
		case p < 9:
			cc.indexRead(ctx, agent)
		default:
			cc.defaultRead(ctx, agent)
		}
	}
}

// retryable reports whether err leaves the operation worth another attempt
// (on another member); anything else is a refusal the workload never
// provokes, so it is a violation.
func retryable(err error) bool {
	var ae *client.Error
	if !errors.As(err, &ae) {
		return true // transport failure: the member died or was cut off
	}
	switch ae.Code {
	case codes.NotLeader, codes.OutcomeUnknown, codes.NotReady, codes.Internal:
		return true
	}
	return false
}

// deploy sends one logical deploy — one Idempotency-Key — through random
// members until it is acknowledged or chaosOpDeadline passes.
func (cc *chaosClient) deploy(ctx context.Context, agent string) {
	key := client.NewIdempotencyKey()
	in := opInput{kind: opDeploy, agent: agent, key: key}
	call := cc.h.now()
	deadline := time.Now().Add(chaosOpDeadline)
	for time.Now().Before(deadline) {
		var m client.Meta
		rctx, cancel := context.WithTimeout(client.WithMeta(client.WithIdempotencyKey(ctx, key), &m), chaosRequest)
		n := cc.member()
		res, err := cc.client(n).Deploy(rctx, workloadNS, agent, wire.Deploy{})
		cancel()
		if err == nil {
			cc.h.add(cc.id, in, call, opOutput{known: true, number: res.Number}, cc.h.now())
			cc.acked = append(cc.acked, ackedDeploy{key: key, agent: agent, revisionID: res.ID, number: res.Number})
			cc.floor = max(cc.floor, m.Index)
			cc.seen[agent] = max(cc.seen[agent], res.Number)
			return
		}
		if !retryable(err) {
			cc.violations = append(cc.violations, fmt.Sprintf("deploy %s (key %s) refused by %s at index %d: %v", agent, key, n.ID, m.Index, err))
			break
		}
		time.Sleep(20 * time.Millisecond) // pacing between members, not a wait for an event
	}
	cc.unknown++
	cc.h.addUnknown(cc.id, in, call)
}

func notFound(err error) bool {
	var ae *client.Error
	return errors.As(err, &ae) && ae.Code == codes.NotFound
}

// consistentRead records a linearizable read for the porcupine check; a
// failed attempt had no effect and is left out of the history.
func (cc *chaosClient) consistentRead(ctx context.Context, agent string) {
	call := cc.h.now()
	var m client.Meta
	rctx, cancel := context.WithTimeout(client.WithMeta(client.WithReadOptions(ctx, client.ReadOptions{Consistent: true}), &m),
		chaosRequest)
	n := cc.member()
	a, err := cc.client(n).Agent(rctx, workloadNS, agent)
	cancel()
	ret := cc.h.now()
	switch {
	case err == nil:
		cc.h.add(cc.id, opInput{kind: opRead, agent: agent}, call,
			opOutput{known: true, count: a.RevisionCount, activeID: a.ActiveRevisionID}, ret)
	case notFound(err):
		cc.violations = append(cc.violations, fmt.Sprintf("consistent read of %s on %s answered at index %d: %v", agent, n.ID, m.Index, err))
	}
}

// indexRead asks for at least the highest index this client has seen: the
// answer must not be older than anything the client saw or wrote.
func (cc *chaosClient) indexRead(ctx context.Context, agent string) {
	var m client.Meta
	rctx, cancel := context.WithTimeout(client.WithMeta(client.WithReadOptions(ctx,
		client.ReadOptions{MinIndex: cc.floor}), &m), chaosRequest)
	n := cc.member()
	a, err := cc.client(n).Agent(rctx, workloadNS, agent)
	cancel()
	switch {
	case err == nil:
		cc.reads++
		if m.Index < cc.floor {
			cc.violations = append(cc.violations, fmt.Sprintf("read of %s served at index %d below the asked %d", agent, m.Index, cc.floor))
		}
		if a.RevisionCount < cc.seen[agent] {
			cc.violations = append(cc.violations, fmt.Sprintf("read of %s at index %d shows %d revisions; this client saw %d",
				agent, m.Index, a.RevisionCount, cc.seen[agent]))
		}
		cc.observed = append(cc.observed, observation{agent: agent, index: m.Index, count: a.RevisionCount,
			activeID: a.ActiveRevisionID})
		cc.floor = max(cc.floor, m.Index)
		cc.seen[agent] = max(cc.seen[agent], a.RevisionCount)
	case notFound(err):
		cc.violations = append(cc.violations, fmt.Sprintf("at-least-index read of %s (index %d) on %s answered at index %d: %v",
			agent, cc.floor, n.ID, m.Index, err))
	}
}

// defaultRead may be stale (bounded) or refused, never NOT_FOUND for an
// Agent that exists.
func (cc *chaosClient) defaultRead(ctx context.Context, agent string) {
	var m client.Meta
	rctx, cancel := context.WithTimeout(client.WithMeta(ctx, &m), chaosRequest)
	n := cc.member()
	_, err := cc.client(n).Agent(rctx, workloadNS, agent)
	cancel()
	if notFound(err) {
		cc.violations = append(cc.violations, fmt.Sprintf("default read of %s on %s answered at index %d: %v", agent, n.ID, m.Index, err))
	}
}

// nemesis injects one fault at a time until stop: SIGKILL of the leader
// (restarted after a pause), isolation of the leader, or isolation of a
// random member (healed after a pause). The pauses are the fault schedule.
func (c *cluster) nemesis(t *testing.T, rng *rand.Rand, stop time.Time) []string {
	t.Helper()
	pause := func(min, spread time.Duration) {
		time.Sleep(min + time.Duration(rng.Int64N(int64(spread))))
	}
	var log []string
	for time.Now().Before(stop) {
		pause(time.Second, 2*time.Second)
		leader := c.currentLeader()
		switch f := rng.IntN(3); {
		case f == 0 && leader != nil:
			leader.kill()
			log = append(log, "kill "+leader.ID)
			pause(300*time.Millisecond, 1500*time.Millisecond)
			c.start(leader)
		case f == 1 && leader != nil:
			c.isolate(leader)
			log = append(log, "isolate leader "+leader.ID)
			pause(time.Second, 2*time.Second)
			c.heal()
		default:
			victim := c.Nodes[rng.IntN(len(c.Nodes))]
			c.isolate(victim)
			log = append(log, "isolate "+victim.ID)
			pause(time.Second, 2*time.Second)
			c.heal()
		}
	}
	return log
}

// currentLeader is the running member that reports itself leader, if any.
func (c *cluster) currentLeader() *node {
	for _, n := range c.Nodes {
		if !n.running() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := c.client(n).Cluster(ctx)
		cancel()
		if err == nil && info.State == "Leader" {
			return n
		}
	}
	return nil
}

// checkDeploys: no key took effect twice, no acknowledged deploy was lost,
// and each Agent's revisions are exactly its deploys that took effect. It
// returns every revision's number by id.
func checkDeploys(t *testing.T, final snapshotOf, clients []*chaosClient) map[string]int64 {
	t.Helper()
	numbers := map[string]int64{}
	byAgent := map[string]string{} // name → id
	for _, a := range final.agents {
		byAgent[a.Name] = a.ID
		for _, r := range final.revisions[a.ID] {
			numbers[r.ID] = r.Number
		}
	}
	issued, acked := map[string]int{}, map[string]int{}
	byKey, byRevision := map[string]string{}, map[string]string{}
	for _, cc := range clients {
		for _, d := range cc.acked {
			acked[d.agent]++
			n, ok := numbers[d.revisionID]
			require.True(t, ok, "acknowledged deploy %s of %s (revision %s) is lost", d.key, d.agent, d.revisionID)
			require.Equal(t, d.number, n, "revision %s", d.revisionID)
			require.NotContains(t, byKey, d.key, "key %s acknowledged twice", d.key)
			byKey[d.key] = d.revisionID
			prev, dup := byRevision[d.revisionID]
			require.False(t, dup, "revision %s answered two keys, %s and %s", d.revisionID, prev, d.key)
			byRevision[d.revisionID] = d.key
		}
	}
	for _, op := range clients[0].h.operations() {
		if in := op.Input.(opInput); in.kind == opDeploy {
			issued[in.agent]++
		}
	}
	deployAudits := map[string]int{}
	for _, r := range final.audit {
		if r.Action == wire.AuditDeploy {
			deployAudits[r.AgentID]++
		}
	}
	for name, id := range byAgent {
		revs := len(final.revisions[id])
		require.GreaterOrEqual(t, revs, acked[name], "agent %s", name)
		require.LessOrEqual(t, revs, issued[name], "agent %s: more revisions than deploys: a key took effect twice", name)
		require.Equal(t, revs, deployAudits[id], "agent %s: one deploy audit record per revision", name)
	}
	return numbers
}

// checkMonotonic: each client's at-least-index reads never go backwards.
func checkMonotonic(t *testing.T, clients []*chaosClient, numbers map[string]int64) {
	t.Helper()
	for _, cc := range clients {
		last := map[string]observation{}
		var index uint64
		for _, o := range cc.observed {
			require.GreaterOrEqual(t, o.index, index, "client %d: read index went backwards", cc.id)
			index = o.index
			p, ok := last[o.agent]
			if ok {
				require.GreaterOrEqual(t, o.count, p.count, "client %d, %s: revision count went backwards", cc.id, o.agent)
				require.GreaterOrEqual(t, active(t, numbers, o.activeID), active(t, numbers, p.activeID),
					"client %d, %s: active revision went backwards", cc.id, o.agent)
			}
			last[o.agent] = o
		}
	}
}

func active(t *testing.T, numbers map[string]int64, id string) int64 {
	t.Helper()
	if id == "" {
		return 0
	}
	n, ok := numbers[id]
	require.True(t, ok, "a read saw active revision %s, which does not exist afterwards", id)
	return n
}

// checkLinearizable resolves the reads' active revisions to numbers and
// checks the history with porcupine; a failure leaves a visualization.
func checkLinearizable(t *testing.T, ops []porcupine.Operation, numbers map[string]int64, seed uint64) {
	t.Helper()
	for i := range ops {
		if out := ops[i].Output.(opOutput); ops[i].Input.(opInput).kind == opRead {
			out.active = active(t, numbers, out.activeID)
			ops[i].Output = out
		}
	}
	model := agentModel.ToModel()
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, ops, chaosCheck)
	t.Logf("chaos: porcupine checked %d operations in %s: %s", len(ops), time.Since(start).Round(time.Millisecond), res)
	if res == porcupine.Ok {
		return
	}
	path := filepath.Join(os.TempDir(), fmt.Sprintf("oce-chaos-%d.html", seed))
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		t.Logf("visualization: %v", err)
	}
	t.Fatalf("the history of %d operations is not linearizable (porcupine: %s); visualization: %s", len(ops), res, path)
}
