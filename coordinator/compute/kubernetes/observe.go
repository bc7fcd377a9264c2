package kubernetes

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

// ObserveRevision implements compute.Driver. Dedicated: the Harness must
// pass ProviderHarnessReady, then the Gateway. Embedded: the Gateway running
// this revision must pass it; a staged replacement (the Agent's Gateway runs
// an earlier revision) is ready once its configuration exists, because
// embedded preparation does not validate the replacement (docs/design/seed-000.md#step-3).
func (d *Driver) ObserveRevision(ctx context.Context, rev state.Revision) (compute.Observation, error) {
	p, err := d.planFor(rev)
	if err != nil {
		return compute.Observation{}, err
	}
	r, err := d.revisionReadiness(ctx, p)
	if err != nil {
		return compute.Observation{}, err
	}
	return compute.Observation{Ready: r.Ready, Reason: r.Reason, HeldCode: r.HeldCode, Cause: r.Cause,
		Staged: r.Ready && r.Reason == ReasonStaged}, nil
}

func (d *Driver) podReadiness(ctx context.Context, ns string, want map[string]string) (Readiness, error) {
	l, err := d.c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(want).String()})
	if err != nil {
		return Readiness{}, transient(err)
	}
	r := ProviderHarnessReady(l, ns, want)
	if r.Reason != ReasonPodNotReady {
		return r, nil
	}
	for i := range l.Items {
		if p := &l.Items[i]; p.Name == r.Pod {
			return d.heldFromProbe(ctx, p, r)
		}
	}
	return r, nil
}

func (d *Driver) revisionReadiness(ctx context.Context, p *plan) (Readiness, error) {
	if p.topo == contract.DedicatedCodex {
		hr, err := d.podReadiness(ctx, p.dp, p.harnessWantLabels())
		if err != nil || !hr.Ready {
			if hr.HeldCode == "" && hr.Reason != "" {
				hr.Reason = ReasonHarnessNotReady + ":" + hr.Reason
			}
			return hr, err
		}
		// The Harness is ready only with its workspace node enrolled at
		// the Gateway serving it (docs/design/seed-000.md#step-2).
		ep, r, err := d.servingGateway(ctx, p)
		if err != nil || !r.Ready {
			return r, err
		}
		return d.nodeReadiness(ctx, p, ep)
	}
	r, _, err := d.gatewayReadiness(ctx, p)
	return r, err
}

// gatewayReadiness checks the Agent's Gateway for p and returns the
// revision it runs.
func (d *Driver) gatewayReadiness(ctx context.Context, p *plan) (Readiness, string, error) {
	gw, err := d.c.AppsV1().Deployments(p.gw).Get(ctx, p.n.gateway, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Readiness{Reason: ReasonGatewayMissing}, "", nil
	}
	if err != nil {
		return Readiness{}, "", transient(err)
	}
	if !p.agentOwn.owns(gw.Labels, gw.Annotations, true) {
		return Readiness{}, "", foreign(p.gw, p.n.gateway)
	}
	running := gw.Labels[LabelRevision]
	if running == p.rev.ID {
		r, err := d.podReadiness(ctx, p.gw, p.gatewayWantLabels())
		return r, running, err
	}
	if p.topo == contract.Embedded {
		cm, err := d.c.CoreV1().ConfigMaps(p.gw).Get(ctx, p.n.gatewayConfig, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return Readiness{Reason: ReasonGatewayMissing}, running, nil
		}
		if err != nil {
			return Readiness{}, running, transient(err)
		}
		if !p.own.owns(cm.Labels, cm.Annotations, false) {
			return Readiness{}, running, foreign(p.gw, p.n.gatewayConfig)
		}
		return Readiness{Ready: true, Reason: ReasonStaged}, running, nil
	}
	// Dedicated with a predecessor Gateway still serving: it must be the
	// single ready Gateway of its own revision; activation switches it.
	prev := *p
	prev.own.RevisionID = running
	r, err := d.podReadiness(ctx, p.gw, prev.gatewayWantLabels())
	if err == nil && !r.Ready {
		r.Reason = ReasonGatewayMissing + ":" + r.Reason
		r.HeldCode, r.Cause = "", nil // the predecessor's hold is not this revision's
	}
	return r, running, err
}
