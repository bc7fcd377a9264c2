package kubernetes

import (
	"context"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

// ActivateRevision implements compute.Driver. It repeats the readiness
// check before changing routing, points the Agent's Gateway Deployment at
// the revision (Recreate) when it runs another one, and switches the
// Gateway and (dedicated) Harness Services to their active selectors.
func (d *Driver) ActivateRevision(ctx context.Context, rev state.Revision) error {
	p, err := d.planFor(rev)
	if err != nil {
		return err
	}
	r, err := d.revisionReadiness(ctx, p)
	if err != nil {
		return err
	}
	if !r.Ready {
		return compute.Transient(codes.ActivationPending, fmt.Errorf("%w: %s", ErrNotReady, r.Reason))
	}
	gw, err := d.c.AppsV1().Deployments(p.gw).Get(ctx, p.n.gateway, metav1.GetOptions{})
	if err != nil {
		return transient(err)
	}
	if !p.agentOwn.owns(gw.Labels, gw.Annotations, true) {
		return foreign(p.gw, p.n.gateway)
	}
	if gw.Labels[LabelRevision] != rev.ID {
		_, keys, err := d.credentials(ctx, rev)
		if err != nil {
			return err
		}
		if err := d.switchGateway(ctx, gw, p, keys); err != nil {
			return err
		}
	}
	if err := d.deleteProbe(ctx, p); err != nil { // its work is done
		return err
	}
	if err := d.route(ctx, gatewayService(p, true), p.agentOwn); err != nil {
		return err
	}
	if p.topo == contract.DedicatedCodex {
		return d.route(ctx, harnessService(p, true), p.agentOwn)
	}
	return nil
}

// switchGateway points the Agent's Gateway Deployment at p's revision (the
// Recreate strategy stops the old Pod first), conditional on the
// resourceVersion read.
func (d *Driver) switchGateway(ctx context.Context, cur *appsv1.Deployment, p *plan, keys []string) error {
	node, public := "", ""
	if p.topo == contract.DedicatedCodex {
		var err error
		if node, err = d.workspaceNode(ctx, p); err != nil {
			return err
		}
		if public, err = d.nodeRouteURL(ctx, p); err != nil {
			return err
		}
	}
	want := d.gatewayDeployment(p, keys, node, public)
	if err := d.vouchProbe(ctx, p, want); err != nil {
		return err
	}
	stamp(want) // carried by the annotations merged below
	next := cur.DeepCopy()
	next.Labels = merge(cur.Labels, want.Labels)
	next.Annotations = merge(cur.Annotations, want.Annotations)
	next.Spec.Template = want.Spec.Template
	next.Spec.Strategy = want.Spec.Strategy
	next.Spec.Replicas = want.Spec.Replicas
	if _, err := d.c.AppsV1().Deployments(p.gw).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		return transient(err)
	}
	return nil
}

// route sets an exactly owned Service's selector to want's (conditional
// update), stamping want's rendering (repair.go).
func (d *Driver) route(ctx context.Context, want *corev1.Service, o owner) error {
	ns, name := want.Namespace, want.Name
	svc, err := d.c.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return transient(fmt.Errorf("service %s/%s is missing", ns, name))
	}
	if err != nil {
		return transient(err)
	}
	if !o.owns(svc.Labels, svc.Annotations, false) {
		return foreign(ns, name)
	}
	stamp(want)
	if maps.Equal(svc.Spec.Selector, want.Spec.Selector) && svc.Annotations[AnnotationRenderedHash] == want.Annotations[AnnotationRenderedHash] {
		return nil
	}
	next := svc.DeepCopy()
	next.Spec.Selector = want.Spec.Selector
	next.Annotations = merge(svc.Annotations, map[string]string{AnnotationRenderedHash: want.Annotations[AnnotationRenderedHash]})
	if _, err := d.c.CoreV1().Services(ns).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		return transient(err)
	}
	return nil
}
