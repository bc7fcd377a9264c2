package kubernetes

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

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
// Secret. Every step is retryable. A runtime found again after this driver
// stopped it is reported as CameBack.
func (d *Driver) StopRevision(ctx context.Context, rev state.Revision) (compute.StopResult, error) {
	p, err := d.planFor(rev)
	if err != nil {
		return compute.StopResult{}, err
	}
	d.setPrepared(rev.ID, 0)
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
	res := compute.StopResult{Stopped: true, CameBack: found && d.wasStopped(rev.ID)}
	d.markStopped(rev.ID, true)
	return res, nil
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

// RetireRevision implements compute.Driver: it stops the revision, then
// deletes every object the revision exactly owns in both physical
// namespaces. The Agent's claims, Services, ServiceAccounts and transport
// Secret are Agent-owned and stay.
func (d *Driver) RetireRevision(ctx context.Context, rev state.Revision) error {
	p, err := d.planFor(rev)
	if err != nil {
		return err
	}
	if _, err := d.StopRevision(ctx, rev); err != nil {
		return err
	}
	for _, ns := range uniq(p.dp, GatewayNamespace(rev.NamespaceID)) {
		if err := d.deleteOwned(ctx, ns, p.own, false, false); err != nil {
			return err
		}
	}
	return nil
}

// DeleteAgentRuntimeCredentials implements compute.Driver: after every
// revision was retired (no Agent Deployment remains), it deletes the
// Agent's exact-owned claims by UID and its remaining Secrets, Services,
// ServiceAccounts, ConfigMaps and policies, checking both physical
// namespaces whatever the Agent's current mode.
func (d *Driver) DeleteAgentRuntimeCredentials(ctx context.Context, agent state.Agent) error {
	o := owner{NamespaceID: agent.NamespaceID, AgentID: agent.ID}
	if err := o.validate(); err != nil {
		return compute.Permanent(codes.InvalidTarget, err)
	}
	for _, ns := range []string{DataPlaneNamespace(agent.NamespaceID), GatewayNamespace(agent.NamespaceID)} {
		l, err := d.c.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: o.selector()})
		if err != nil {
			return transient(err)
		}
		for _, dep := range l.Items {
			if o.owns(dep.Labels, dep.Annotations, true) {
				return transient(fmt.Errorf("deployment %s/%s of the Agent is not retired", ns, dep.Name))
			}
		}
		if err := d.deleteOwned(ctx, ns, o, true, true); err != nil {
			return err
		}
	}
	return nil
}

func uniq(a, b string) []string {
	if a == b {
		return []string{a}
	}
	return []string{a, b}
}

// kindOps lists and deletes one resource kind in a namespace.
type kindOps struct {
	name   string
	list   func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error)
	delete deleter
}

func (d *Driver) kinds(ns string, claims bool) []kindOps {
	c := d.c.CoreV1()
	k := []kindOps{
		{"deployments", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return d.c.AppsV1().Deployments(ns).List(ctx, o)
		}, d.c.AppsV1().Deployments(ns)},
		{"networkpolicies", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return d.c.NetworkingV1().NetworkPolicies(ns).List(ctx, o)
		}, d.c.NetworkingV1().NetworkPolicies(ns)},
		{"configmaps", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.ConfigMaps(ns).List(ctx, o)
		}, c.ConfigMaps(ns)},
		{"secrets", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.Secrets(ns).List(ctx, o)
		}, c.Secrets(ns)},
		{"services", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.Services(ns).List(ctx, o)
		}, c.Services(ns)},
		{"serviceaccounts", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.ServiceAccounts(ns).List(ctx, o)
		}, c.ServiceAccounts(ns)},
	}
	if claims {
		k = append(k, kindOps{"persistentvolumeclaims", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.PersistentVolumeClaims(ns).List(ctx, o)
		}, c.PersistentVolumeClaims(ns)})
	}
	return k
}

// deleteOwned deletes every object of the managed kinds in ns that o owns
// exactly (anyRevision: an Agent owner also owns its revisions' objects),
// each with a UID precondition.
func (d *Driver) deleteOwned(ctx context.Context, ns string, o owner, anyRevision, claims bool) error {
	for _, k := range d.kinds(ns, claims) {
		obj, err := k.list(ctx, metav1.ListOptions{LabelSelector: o.selector()})
		if err != nil {
			return transient(fmt.Errorf("list %s: %w", k.name, err))
		}
		items, err := apimeta.ExtractList(obj)
		if err != nil {
			return transient(err)
		}
		for _, it := range items {
			m, err := apimeta.Accessor(it)
			if err != nil {
				return transient(err)
			}
			if !o.owns(m.GetLabels(), m.GetAnnotations(), anyRevision) {
				continue
			}
			if err := deleteExact(ctx, k.delete, m.GetName(), m.GetUID(), ""); err != nil {
				return err
			}
		}
	}
	return nil
}
