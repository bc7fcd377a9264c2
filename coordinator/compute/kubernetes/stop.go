package kubernetes

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

// StopRevision implements compute.Driver (docs/design/reference.md#s5-3): it deletes the
// Gateway Deployment when it runs this revision (uid + resourceVersion
// precondition) and waits until the revision's Gateway Pods are gone (up to
// GatewayStopWait); only then deletes the Harness Deployment and waits for
// its Pods (up to HarnessStopWait); then removes the one-use enrollment
// Secret. Every step is retryable. It reports a live runtime as Found and
// remembers nothing: whether it came back after an earlier stop is the
// engine's to judge from its replicated stop records, so a new leader's
// driver judges it as the old one would.
func (d *Driver) StopRevision(ctx context.Context, rev state.Revision) (compute.StopResult, error) {
	p, err := d.planFor(rev)
	if err != nil {
		return compute.StopResult{}, err
	}
	d.setPrepared(rev.ID, 0)
	if err := d.deleteProbe(ctx, p); err != nil {
		return compute.StopResult{}, err
	}
	found, err := d.deleteDeployment(ctx, p.gw, p.n.gateway, func(l, a map[string]string) (bool, bool) {
		return p.agentOwn.owns(l, a, true), l[LabelRevision] == rev.ID
	})
	if err != nil {
		return compute.StopResult{}, err
	}
	live, err := d.waitPodsGone(ctx, p.gw, p.gatewayWantLabels(), d.cfg.GatewayStopWait)
	found = found || live
	if err != nil {
		return compute.StopResult{}, err
	}
	if p.topo == contract.DedicatedCodex {
		hFound, err := d.deleteDeployment(ctx, p.dp, p.n.harness, func(l, a map[string]string) (bool, bool) {
			return p.own.owns(l, a, false), true
		})
		found = found || hFound
		if err != nil {
			return compute.StopResult{}, err
		}
		live, err := d.waitPodsGone(ctx, p.dp, p.harnessWantLabels(), d.cfg.HarnessStopWait)
		found = found || live
		if err != nil {
			return compute.StopResult{}, err
		}
		// Cleanup: the one-use enrollment Secret (an absent one does not
		// skip the step; a failure stays retryable).
		if err := d.deleteOwnedNamed(ctx, p.dp, p.n.enrollment, p.own); err != nil {
			return compute.StopResult{}, err
		}
	}
	return compute.StopResult{Stopped: true, Found: found}, nil
}

// deleteDeployment deletes the named Deployment when check reports it
// exactly owned (else FOREIGN_WORKLOAD) and selected, with uid and
// resourceVersion preconditions; a conflict (a controller updated its
// status meanwhile) re-reads and re-checks it. It reports whether a live
// (non-terminating) Deployment was found.
func (d *Driver) deleteDeployment(ctx context.Context, ns, name string, check func(labels, annotations map[string]string) (owned, selected bool)) (bool, error) {
	c := d.c.AppsV1().Deployments(ns)
	var err error
	for range 5 {
		dep, gerr := c.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(gerr) {
			return false, nil
		}
		if gerr != nil {
			return false, transient(gerr)
		}
		owned, selected := check(dep.Labels, dep.Annotations)
		if !owned {
			return false, foreign(ns, name)
		}
		if !selected {
			return false, nil
		}
		live := dep.DeletionTimestamp == nil
		err = c.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationBackground),
			Preconditions: &metav1.Preconditions{UID: &dep.UID, ResourceVersion: &dep.ResourceVersion}})
		if err == nil || apierrors.IsNotFound(err) {
			return live, nil
		}
		if !apierrors.IsConflict(err) {
			return live, transient(err)
		}
	}
	return false, transient(err)
}

// waitPodsGone polls until no Pod with the labels exists (terminating ones
// included). It reports whether any live (non-terminating) Pod was seen.
func (d *Driver) waitPodsGone(ctx context.Context, ns string, want map[string]string, limit time.Duration) (bool, error) {
	sel := labels.SelectorFromSet(want).String()
	deadline := time.Now().Add(limit)
	live := false
	for {
		l, err := d.c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return live, transient(err)
		}
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil {
				live = true
			}
		}
		if len(l.Items) == 0 {
			return live, nil
		}
		if time.Now().After(deadline) {
			return live, compute.Transient(codes.StopTimeout, fmt.Errorf("%w: %d pods in %s", ErrStillRunning, len(l.Items), ns))
		}
		t := time.NewTimer(d.cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return live, ctx.Err()
		case <-t.C:
		}
	}
}

func (d *Driver) deleteOwnedNamed(ctx context.Context, ns, name string, o owner) error {
	s, err := d.c.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return transient(err)
	}
	if !o.owns(s.Labels, s.Annotations, false) {
		return nil // not ours: never deleted
	}
	return deleteExact(ctx, d.c.CoreV1().Secrets(ns), name, s.UID, "")
}
