package kubernetes

import (
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"oce.dev/oce/shared/codes"
)

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
