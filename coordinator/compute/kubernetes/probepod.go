package kubernetes

import (
	"context"
	"errors"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"oce.dev/oce/shared/contract"
)

// The embedded model probe before cutover on Kubernetes (issue 23, as the
// local driver runs it: Config.ProbeBeforeCutover). A staged embedded
// replacement — the Agent's Gateway still serves an earlier revision —
// gets a probe Pod: the revision's own gatewayd in probe-only mode
// (contract.EnvModelProbeOnly) with the revision's credential and
// configuration and none of the Agent's state, under its own
// NetworkPolicy (the Gateway's model egress, no ingress at all). The
// staged revision is ready once that Pod is Ready (its probe passed); a
// held failure — a key only a model turn refuses — fails the revision
// while the predecessor keeps serving. At the cutover the Gateway starts
// with the time the probe passed (contract.EnvModelProbePassedAt), so it
// does not probe again, and the probe Pod is deleted.

// Probe Pod labels and readiness reasons.
const (
	// RoleProbe is the workload role of a probe Pod: no Service and no
	// Gateway policy selects it.
	RoleProbe = "gateway-probe"
	// ReasonProbing: the staged revision's model probe runs (or its Pod
	// is being created again).
	ReasonProbing = "model-probe-before-cutover"
	// ReasonProbeExited: the probe Pod ended without a held failure.
	ReasonProbeExited = "model-probe-exited"
)

// probeName is the revision's probe Pod and policy: gateway-<a12>-rev-<r12>-probe.
func (p *plan) probeName() string { return p.n.gatewayConfig + "-probe" }

// probeLabels are the probe Pod's labels (its readiness selects them all).
func (p *plan) probeLabels() map[string]string {
	return merge(p.own.labels(), map[string]string{LabelRole: RoleProbe, LabelName: p.probeName(),
		LabelNetworkProfile: NetworkProfileOrdinary})
}

// probeWanted reports whether a staged revision gets a probe Pod.
func (d *Driver) probeWanted(p *plan) bool {
	return d.cfg.ProbeBeforeCutover && p.topo == contract.Embedded
}

// probePod renders the probe Pod from the revision's own Gateway Pod
// template: probe-only, the state claim replaced by an emptyDir (the probe
// touches no Gateway state; the predecessor holds the claim), never
// restarted (a held failure is the answer).
func (d *Driver) probePod(p *plan, keys []string) *corev1.Pod {
	spec := *d.gatewayDeployment(p, keys, "", "").Spec.Template.Spec.DeepCopy()
	spec.Containers[0].Env = append(spec.Containers[0].Env, env(contract.EnvModelProbeOnly, "1")...)
	for i := range spec.Volumes {
		if spec.Volumes[i].PersistentVolumeClaim != nil {
			spec.Volumes[i].VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
		}
	}
	spec.RestartPolicy = corev1.RestartPolicyNever
	return &corev1.Pod{ObjectMeta: meta(p.probeName(), p.gw, p.own, p.probeLabels()), Spec: spec}
}

// probePolicy lets the probe Pod reach the model exactly as the revision's
// Gateway may (the egress of its runtime policy) and admits nothing: its
// readiness is kubelet's exec probe.
func (d *Driver) probePolicy(p *plan) *networkingv1.NetworkPolicy {
	var egress []networkingv1.NetworkPolicyEgressRule
	for _, np := range d.revisionPolicies(p) {
		if np.Name == p.n.policyRuntime {
			egress = np.Spec.Egress
		}
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: meta(p.probeName(), p.gw, p.own, nil),
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: p.probeLabels()},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Egress:      egress},
	}
}

// ensureProbe creates the staged revision's probe policy and Pod.
func (d *Driver) ensureProbe(ctx context.Context, p *plan, keys []string) error {
	if !d.probeWanted(p) {
		return nil
	}
	if _, err := ensure(ctx, d.c.NetworkingV1().NetworkPolicies(p.gw), d.probePolicy(p), p.own); err != nil {
		return err
	}
	if _, err := ensure(ctx, d.c.CoreV1().Pods(p.gw), d.probePod(p, keys), p.own); err != nil {
		return err
	}
	return nil
}

// probeReadiness is a staged revision's readiness: its probe Pod's. A
// missing Pod is created again by the next preparation pass.
func (d *Driver) probeReadiness(ctx context.Context, p *plan) (Readiness, error) {
	pod, err := d.probeOf(ctx, p)
	if err != nil {
		return Readiness{}, err
	}
	if pod == nil {
		d.setPrepared(p.rev.ID, 0)
		return Readiness{Reason: ReasonProbing}, nil
	}
	r, err := d.podReadiness(ctx, p.gw, p.probeLabels())
	switch {
	case err != nil || r.HeldCode != "":
		return r, err
	case r.Ready:
		return Readiness{Ready: true, Reason: ReasonStaged, Pod: r.Pod}, nil
	case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
		return Readiness{Reason: ReasonProbeExited, Pod: pod.Name}, nil
	}
	r.Reason = ReasonProbing + ":" + r.Reason
	return r, nil
}

// vouchProbe adds to the Gateway d is switching to p's revision the time
// its probe passed: when the probe Pod became Ready (the readiness check
// passes only after the probe did). gatewayd skips its own probe when that
// is recent (contract.ModelProbeFreshFor).
func (d *Driver) vouchProbe(ctx context.Context, p *plan, want *appsv1.Deployment) error {
	if !d.probeWanted(p) {
		return nil
	}
	pod, err := d.probeOf(ctx, p)
	if err != nil || pod == nil {
		return err
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			ms := strconv.FormatInt(c.LastTransitionTime.UnixMilli(), 10)
			cs := want.Spec.Template.Spec.Containers
			cs[0].Env = append(cs[0].Env, env(contract.EnvModelProbePassedAt, ms)...)
		}
	}
	return nil
}

// probeOf reads the revision's probe Pod: nil when there is none, an error
// when another owner's Pod has its name.
func (d *Driver) probeOf(ctx context.Context, p *plan) (*corev1.Pod, error) {
	pod, err := d.c.CoreV1().Pods(p.gw).Get(ctx, p.probeName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, transient(err)
	}
	if !p.own.owns(pod.Labels, pod.Annotations, false) {
		return nil, foreign(p.gw, p.probeName())
	}
	return pod, nil
}

// deleteProbe removes the revision's probe Pod (its policy goes with the
// revision's other objects).
func (d *Driver) deleteProbe(ctx context.Context, p *plan) error {
	if p.topo != contract.Embedded {
		return nil
	}
	pod, err := d.probeOf(ctx, p)
	if err != nil || pod == nil {
		if errors.Is(err, ErrForeignWorkload) {
			return nil // not ours: never deleted
		}
		return err
	}
	return deleteExact(ctx, d.c.CoreV1().Pods(p.gw), pod.Name, pod.UID, "")
}
