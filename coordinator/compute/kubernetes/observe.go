package kubernetes

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/status"
)

// ObserveRevision implements compute.Driver. Dedicated: the Harness must
// pass ProviderHarnessReady, then the Gateway. Embedded: the Gateway running
// this revision must pass it; a staged replacement (the Agent's Gateway runs
// an earlier revision) is ready once its configuration exists, because
// embedded preparation does not validate the replacement (docs/design/seed-000.md#step-3).
// A start under way may be answered from the caches (pendingFromCache):
// an activation's readiness passes then cost no request, and the caches'
// change notification brings the next pass when its Pod changes.
func (d *Driver) ObserveRevision(ctx context.Context, rev state.Revision) (compute.Observation, error) {
	p, err := d.planFor(rev)
	if err != nil {
		return compute.Observation{}, err
	}
	if p.topo != contract.DedicatedCodex {
		if _, ok := d.readyFromCache(p); ok {
			// Watched: a change of this verdict is a change of the
			// Gateway's Pod or Deployment, which NotifyChanges tells.
			// (Dedicated readiness also asks the Gateway whether the node
			// is connected, which no watch tells.)
			return compute.Observation{Ready: true, Reason: ReasonReady, Watched: true}, nil
		}
	}
	r, ok := d.pendingFromCache(p)
	if !ok {
		// Activation's own check (revisionReadiness) is not deferred from
		// the caches: it gates a write, and a lagging cache must not turn
		// a readiness just observed into a pending activation.
		if r, err = d.revisionReadiness(ctx, p); err != nil {
			return compute.Observation{}, err
		}
	}
	return compute.Observation{Ready: r.Ready, Reason: r.Reason, HeldCode: r.HeldCode, Cause: r.Cause,
		Staged: r.Ready && r.Reason == ReasonStaged}, nil
}

func (d *Driver) revisionReadiness(ctx context.Context, p *plan) (Readiness, error) {
	if ep, ok := d.readyFromCache(p); ok {
		if p.topo != contract.DedicatedCodex {
			return Readiness{Ready: true, Reason: ReasonReady, Pod: ep.Pod}, nil
		}
		if r, ok := d.pinnedNodeReady(ctx, p, ep); ok {
			return r, nil
		}
		// Anything short of that is the full check's, from the API server:
		// a cached endpoint may be stale, and must never make a verdict.
	}
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
		if d.probeWanted(p) {
			r, err := d.probeReadiness(ctx, p)
			return r, running, err
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

// servingGateway finds the single ready Gateway Pod serving the dedicated
// revision's bootstrap: its own Gateway, or the predecessor's while it
// still runs. ok is false while there is none.
func (d *Driver) servingGateway(ctx context.Context, p *plan) (Endpoint, Readiness, error) {
	r, running, err := d.gatewayReadiness(ctx, p)
	if err != nil || !r.Ready {
		return Endpoint{}, r, err
	}
	pod, err := d.c.CoreV1().Pods(p.gw).Get(ctx, r.Pod, metav1.GetOptions{})
	if err != nil {
		return Endpoint{}, r, transient(err)
	}
	return Endpoint{Namespace: p.gw, Service: p.n.gateway, RevisionID: running, Pod: pod.Name,
		PodIP: pod.Status.PodIP, TokenSecret: p.n.password, NodeID: podEnv(pod.Spec, contract.EnvWorkspaceNodeID)}, r, nil
}

// podEnv is the literal value of a Pod's first container's variable.
func podEnv(spec corev1.PodSpec, name string) string {
	if len(spec.Containers) == 0 {
		return ""
	}
	for _, e := range spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
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

// ConditionRuntimeFailure is the Pod condition the runtime status reporter
// sets when a supervisor holds a startup failure (docs/design/reference.md#s1-8): Status
// True, Reason the runtime diagnostic code, Message a JSON
// {"check":…,"cause":{"kind":…,"detail":…}}. Kubelet never sets it; on kwok
// (no container runs) tests set it through UpdateStatus as the reporter would.
const ConditionRuntimeFailure corev1.PodConditionType = "oce.dev/RuntimeFailure"

// Readiness reasons (closed set).
const (
	ReasonReady             = "ready"
	ReasonMalformedList     = "malformed-list"
	ReasonPaginated         = "paginated-list"
	ReasonMalformedPod      = "malformed-pod"
	ReasonForeignPod        = "foreign-pod"
	ReasonNoNetworkProfile  = "no-network-profile"
	ReasonNoCandidate       = "no-candidate"
	ReasonMultipleCandidate = "multiple-candidates"
	ReasonPodNotReady       = "pod-not-ready"
	ReasonHeld              = "held"
	ReasonStaged            = "staged"
	ReasonGatewayMissing    = "gateway-missing"
	ReasonHarnessNotReady   = "harness-not-ready"
)

// Readiness is the verdict of ProviderHarnessReady on one Pod list.
type Readiness struct {
	Ready    bool
	Reason   string
	Pod      string // the single candidate, when there is one
	HeldCode codes.Code
	Cause    *codes.Cause
}

type heldMessage struct {
	Check string       `json:"check"`
	Cause *codes.Cause `json:"cause,omitempty"`
}

// ProviderHarnessReady applies the readiness rule (docs/design/seed-000.md#step-2,
// docs/design/reference.md#s8-8) to a Pod list fetched with want as its label selector:
// the complete observation must validate (not paginated, every Pod well
// formed, in namespace, carrying exactly the wanted labels), and there must
// be exactly one non-terminating candidate, carrying the ordinary network
// profile, with Ready=True. A second live candidate blocks readiness even
// when the first is Ready. A held runtime failure of the candidate is
// reported with its code.
func ProviderHarnessReady(list *corev1.PodList, namespace string, want map[string]string) Readiness {
	if list == nil {
		return Readiness{Reason: ReasonMalformedList}
	}
	if list.Continue != "" || list.RemainingItemCount != nil {
		return Readiness{Reason: ReasonPaginated}
	}
	var cands []*corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if p.Name == "" || p.UID == "" {
			return Readiness{Reason: ReasonMalformedPod}
		}
		if p.Namespace != namespace {
			return Readiness{Reason: ReasonForeignPod, Pod: p.Name}
		}
		for k, v := range want {
			if got, ok := p.Labels[k]; !ok || got != v {
				return Readiness{Reason: ReasonForeignPod, Pod: p.Name}
			}
		}
		if _, _, ok := readyCondition(p); !ok {
			return Readiness{Reason: ReasonMalformedPod, Pod: p.Name}
		}
		if _, _, ok := heldFailure(p); !ok {
			return Readiness{Reason: ReasonMalformedPod, Pod: p.Name}
		}
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		cands = append(cands, p)
	}
	switch len(cands) {
	case 0:
		return Readiness{Reason: ReasonNoCandidate}
	case 1:
	default:
		return Readiness{Reason: ReasonMultipleCandidate}
	}
	p := cands[0]
	if p.Labels[LabelNetworkProfile] != NetworkProfileOrdinary {
		return Readiness{Reason: ReasonNoNetworkProfile, Pod: p.Name}
	}
	if code, cause, _ := heldFailure(p); code != "" {
		return Readiness{Reason: ReasonHeld, Pod: p.Name, HeldCode: code, Cause: cause}
	}
	if ready, _, _ := readyCondition(p); !ready {
		return Readiness{Reason: ReasonPodNotReady, Pod: p.Name}
	}
	return Readiness{Ready: true, Reason: ReasonReady, Pod: p.Name}
}

// readyCondition returns whether the Pod is Ready, whether it has a Ready
// condition, and false in ok when the conditions are malformed (duplicate
// Ready, unknown status).
func readyCondition(p *corev1.Pod) (ready, present, ok bool) {
	for _, c := range p.Status.Conditions {
		if c.Type != corev1.PodReady {
			continue
		}
		if present {
			return false, true, false
		}
		present = true
		switch c.Status {
		case corev1.ConditionTrue:
			ready = true
		case corev1.ConditionFalse, corev1.ConditionUnknown:
		default:
			return false, true, false
		}
	}
	return ready, present, true
}

// heldFailure reads the runtime-failure condition; ok is false when it is
// malformed (duplicate, unknown code, bad message).
func heldFailure(p *corev1.Pod) (code codes.Code, cause *codes.Cause, ok bool) {
	seen := false
	for _, c := range p.Status.Conditions {
		if c.Type != ConditionRuntimeFailure {
			continue
		}
		if seen {
			return "", nil, false
		}
		seen = true
		switch c.Status {
		case corev1.ConditionFalse, corev1.ConditionUnknown:
			continue
		case corev1.ConditionTrue:
		default:
			return "", nil, false
		}
		cd := codes.Code(c.Reason)
		if !codes.IsRuntimeDiagnostic(cd) {
			return "", nil, false
		}
		var m heldMessage
		if strings.TrimSpace(c.Message) != "" {
			if err := json.Unmarshal([]byte(c.Message), &m); err != nil {
				return "", nil, false
			}
			if m.Cause != nil && !codes.IsCauseKind(m.Cause.Kind) {
				return "", nil, false
			}
		}
		code, cause = cd, m.Cause
	}
	return code, cause, true
}

// How a held startup failure reaches the coordinator (docs/kubernetes.md,
// "Held failures"): the supervisor's exec readiness probe (`gatewayd
// ready`, `harnessd ready`) prints the held reason ("runtime not ready;
// startup check <check> failed with <CODE>") and kubelet records it in the
// Pod's "Unhealthy" Event ("Readiness probe failed: <output>"). The driver
// reads that Event. The Pod gets no API credential and no new network
// path is opened to it: kubelet, which already runs the probe, is the
// reporter, and the driver needs only list on Events in the namespaces it
// manages.
const (
	eventReasonUnhealthy = "Unhealthy"
	eventSourceKubelet   = "kubelet"
	readinessFailed      = "Readiness probe failed:"
)

// heldFromProbe upgrades a not-ready verdict to a held one when kubelet
// reported, for the Pod's current container instances, a readiness probe
// failure carrying a held reason. A malformed or foreign Event is ignored.
func (d *Driver) heldFromProbe(ctx context.Context, p *corev1.Pod, r Readiness) (Readiness, error) {
	since, ok := containersStarted(p)
	if !ok {
		return r, nil // a container has not started: nothing can be held yet
	}
	sel := fields.Set{"involvedObject.uid": string(p.UID), "reason": eventReasonUnhealthy}.AsSelector().String()
	l, err := d.c.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return Readiness{}, transient(err)
	}
	var newest time.Time
	for _, e := range l.Items {
		if e.InvolvedObject.UID != p.UID || e.InvolvedObject.Kind != "Pod" || e.Reason != eventReasonUnhealthy ||
			(e.Source.Component != eventSourceKubelet && e.ReportingController != eventSourceKubelet) ||
			!strings.HasPrefix(e.Message, readinessFailed) {
			continue
		}
		at := eventTime(e)
		if at.Before(since) || at.Before(newest) {
			continue // an earlier container instance's, or older than one already taken
		}
		if _, code, ok := status.ParseHeldReason(e.Message); ok {
			newest = at
			r = Readiness{Reason: ReasonHeld, Pod: p.Name, HeldCode: code}
		}
	}
	return r, nil
}

// containersStarted returns the latest start time of the Pod's running
// containers; ok is false unless every container runs.
func containersStarted(p *corev1.Pod) (time.Time, bool) {
	var latest time.Time
	if len(p.Status.ContainerStatuses) == 0 {
		return latest, false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return latest, false
		}
		if t := cs.State.Running.StartedAt.Time; t.After(latest) {
			latest = t
		}
	}
	// Event and start times have one-second resolution in the core API.
	return latest.Truncate(time.Second), true
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	}
	return e.FirstTimestamp.Time
}
