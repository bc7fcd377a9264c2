package kubernetes

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

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

// deleter is the part of a typed client the exact-owner deletes use.
type deleter interface {
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// deleteExact deletes name when obj (already fetched) is exactly owned,
// with a UID (and, when rv is set, resourceVersion) precondition. A missing
// object is success; a foreign one is never touched.
func deleteExact(ctx context.Context, c deleter, name string, uid types.UID, rv string) error {
	pre := &metav1.Preconditions{UID: &uid}
	if rv != "" {
		pre.ResourceVersion = &rv
	}
	err := c.Delete(ctx, name, metav1.DeleteOptions{Preconditions: pre, PropagationPolicy: ptr(metav1.DeletePropagationBackground)})
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	return transient(err)
}
