package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"oce.dev/oce/coordinator/compute"
	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/engine"
	"oce.dev/oce/coordinator/state"
)

// countedRepairs is the driver with its repair passes counted.
type countedRepairs struct {
	*kdriver.Driver
	mu      sync.Mutex
	passes  int
	changed int
}

func (c *countedRepairs) RepairRevision(ctx context.Context, rev state.Revision) ([]compute.Repair, error) {
	rs, err := c.Driver.RepairRevision(ctx, rev)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.passes++
	}
	for _, r := range rs {
		if r.Changed() {
			c.changed++
		}
	}
	return rs, err
}

func (c *countedRepairs) counts() (passes, changed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.passes, c.changed
}

// TestDriftRepairOnTheAPIServer: an active embedded Agent at rest is
// checked again and again against the real API server, whose defaults do
// not count as drift; its Gateway Deployment deleted by hand is recreated
// by the health watcher, audited once, without a deploy.
func TestDriftRepairOnTheAPIServer(t *testing.T) {
	ctx := context.Background()
	var cr *countedRepairs
	r := newEngineRigWith(t, state.ModeEmbedded, func(c *engine.Config) {
		c.HealthInterval, c.RepairInterval, c.RepairRetry = 50*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
	}, func(d compute.Driver) compute.Driver {
		cr = &countedRepairs{Driver: d.(*kdriver.Driver)}
		return cr
	})
	r1 := uid("r")
	r.wait(r.deploy(r1))
	dp := kdriver.DataPlaneNamespace(r.nsID)
	gwSel := sel(kdriver.LabelAgent, r.agent, kdriver.LabelRevision, r1, kdriver.LabelRole, kdriver.RoleGateway)
	require.Eventually(t, func() bool { h, ok := r.m.Health(r.agent); return ok && h.Ready }, 60*time.Second, 20*time.Millisecond)

	p0, _ := cr.counts()
	require.Eventually(t, func() bool { p, _ := cr.counts(); return p >= p0+5 }, 60*time.Second, 20*time.Millisecond, "passes at rest")
	_, changed := cr.counts()
	require.Zero(t, changed, "the API server's defaults are no drift")
	require.Empty(t, repairAudits(r.m))

	deps := env.Client.AppsV1().Deployments(dp)
	l, err := deps.List(ctx, metav1.ListOptions{LabelSelector: gwSel})
	require.NoError(t, err)
	require.Len(t, l.Items, 1)
	old := l.Items[0]
	require.NotEmpty(t, old.Annotations[kdriver.AnnotationRenderedHash], "activation stamped its rendering")
	require.NoError(t, deps.Delete(ctx, old.Name, metav1.DeleteOptions{}))

	require.Eventually(t, func() bool {
		dep, err := deps.Get(ctx, old.Name, metav1.GetOptions{})
		return err == nil && dep.UID != old.UID && dep.DeletionTimestamp == nil
	}, 60*time.Second, 20*time.Millisecond, "the Gateway Deployment recreated")
	require.Eventually(t, func() bool { return len(repairAudits(r.m)) == 1 }, 30*time.Second, 20*time.Millisecond)
	rec := repairAudits(r.m)[0]
	require.Equal(t, map[string]string{"revisionId": r1, "kind": "Deployment", "namespace": dp, "name": old.Name,
		"action": compute.RepairRecreated}, rec.Details)
	require.Equal(t, state.SystemRepairActor, rec.Actor)
	dep, err := deps.Get(ctx, old.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, old.Spec.Template, dep.Spec.Template, "recreated as activation rendered it")

	// Ready again, and later passes over the new object find nothing.
	require.Eventually(t, func() bool { return len(podsOf(t, dp, gwSel)) == 1 }, 60*time.Second, 20*time.Millisecond)
	p1, _ := cr.counts()
	require.Eventually(t, func() bool { p, _ := cr.counts(); return p >= p1+5 }, 60*time.Second, 20*time.Millisecond)
	require.Len(t, repairAudits(r.m), 1, "recreated once")

	// Scaled to zero by hand: restored.
	dep, err = deps.Get(ctx, old.Name, metav1.GetOptions{})
	require.NoError(t, err)
	dep.Spec.Replicas = new(int32)
	_, err = deps.Update(ctx, dep, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(repairAudits(r.m)) == 2 }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, compute.RepairRestored, repairAudits(r.m)[1].Details["action"])
	dep, err = deps.Get(ctx, old.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.EqualValues(t, 1, *dep.Spec.Replicas)
	p2, _ := cr.counts()
	require.Eventually(t, func() bool { p, _ := cr.counts(); return p >= p2+5 }, 60*time.Second, 20*time.Millisecond)
	require.Len(t, repairAudits(r.m), 2, "restored once")

	a, _ := r.m.Agent(r.agent)
	require.Equal(t, r1, a.ActiveRevisionID)
	require.EqualValues(t, 1, a.RevisionCount, "no deploy")
}

func repairAudits(m *state.Machine) []state.AuditRecord {
	var out []state.AuditRecord
	for _, r := range m.Audit(0, 0) {
		if r.Action == state.AuditRepair {
			out = append(out, r)
		}
	}
	return out
}
