package kubernetes

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"oce.dev/oce/shared/codes"
)

var wantLabels = map[string]string{LabelManagedBy: ManagedBy, LabelNamespace: "ns1", LabelAgent: "a1", LabelRevision: "r1", LabelRole: RoleAgent}

type podOpt func(*corev1.Pod)

func pod(name string, opts ...podOpt) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "dp", UID: types.UID("uid-" + name),
			Labels: merge(wantLabels, map[string]string{LabelNetworkProfile: NetworkProfileOrdinary})},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func unready(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }
func terminating(p *corev1.Pod) {
	now := metav1.Now()
	p.DeletionTimestamp = &now
}
func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func label(k, v string) podOpt {
	return func(p *corev1.Pod) {
		if v == "" {
			delete(p.Labels, k)
			return
		}
		p.Labels[k] = v
	}
}
func cond(c corev1.PodCondition) podOpt {
	return func(p *corev1.Pod) { p.Status.Conditions = append(p.Status.Conditions, c) }
}
func noConditions(p *corev1.Pod) { p.Status.Conditions = nil }

func held(code codes.Code, msg string) podOpt {
	return cond(corev1.PodCondition{Type: ConditionRuntimeFailure, Status: corev1.ConditionTrue, Reason: string(code), Message: msg})
}

func list(pods ...corev1.Pod) *corev1.PodList { return &corev1.PodList{Items: pods} }

func TestProviderHarnessReadyTable(t *testing.T) {
	remaining := int64(3)
	cases := []struct {
		name   string
		list   *corev1.PodList
		ready  bool
		reason string
		held   codes.Code
	}{
		{"one ready candidate", list(pod("a")), true, ReasonReady, ""},
		{"nil list", nil, false, ReasonMalformedList, ""},
		{"zero pods", list(), false, ReasonNoCandidate, ""},
		{"one unready", list(pod("a", unready)), false, ReasonPodNotReady, ""},
		{"ready condition missing", list(pod("a", noConditions)), false, ReasonPodNotReady, ""},
		{"ready condition unknown", list(pod("a", func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionUnknown })), false, ReasonPodNotReady, ""},
		{"two ready", list(pod("a"), pod("b")), false, ReasonMultipleCandidate, ""},
		{"ready plus live unready second blocks", list(pod("a"), pod("b", unready)), false, ReasonMultipleCandidate, ""},
		{"ready plus pending second blocks", list(pod("a"), pod("b", phase(corev1.PodPending), unready)), false, ReasonMultipleCandidate, ""},
		{"ready plus terminating ignored", list(pod("a"), pod("b", terminating)), true, ReasonReady, ""},
		{"only terminating", list(pod("a", terminating)), false, ReasonNoCandidate, ""},
		{"ready plus succeeded ignored", list(pod("a"), pod("b", phase(corev1.PodSucceeded))), true, ReasonReady, ""},
		{"only failed", list(pod("a", phase(corev1.PodFailed))), false, ReasonNoCandidate, ""},
		{"paginated continue", &corev1.PodList{ListMeta: metav1.ListMeta{Continue: "tok"}, Items: []corev1.Pod{pod("a")}}, false, ReasonPaginated, ""},
		{"paginated remaining count", &corev1.PodList{ListMeta: metav1.ListMeta{RemainingItemCount: &remaining}, Items: []corev1.Pod{pod("a")}}, false, ReasonPaginated, ""},
		{"pod without name", list(pod("")), false, ReasonMalformedPod, ""},
		{"pod without uid", list(pod("a", func(p *corev1.Pod) { p.UID = "" })), false, ReasonMalformedPod, ""},
		{"pod in another namespace", list(pod("a", func(p *corev1.Pod) { p.Namespace = "other" })), false, ReasonForeignPod, ""},
		{"foreign agent label", list(pod("a"), pod("b", label(LabelAgent, "a2"))), false, ReasonForeignPod, ""},
		{"foreign revision label", list(pod("a", label(LabelRevision, "r0"))), false, ReasonForeignPod, ""},
		{"missing role label", list(pod("a", label(LabelRole, ""))), false, ReasonForeignPod, ""},
		{"wrong role label", list(pod("a", label(LabelRole, RoleGateway))), false, ReasonForeignPod, ""},
		{"missing managed-by", list(pod("a", label(LabelManagedBy, ""))), false, ReasonForeignPod, ""},
		{"no network profile", list(pod("a", label(LabelNetworkProfile, ""))), false, ReasonNoNetworkProfile, ""},
		{"other network profile", list(pod("a", label(LabelNetworkProfile, "privileged"))), false, ReasonNoNetworkProfile, ""},
		{"duplicate ready condition", list(pod("a", cond(corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}))), false, ReasonMalformedPod, ""},
		{"invalid ready status", list(pod("a", func(p *corev1.Pod) { p.Status.Conditions[0].Status = "Maybe" })), false, ReasonMalformedPod, ""},
		{"malformed terminating pod still fails the list", list(pod("a"), pod("b", terminating, func(p *corev1.Pod) { p.UID = "" })), false, ReasonMalformedPod, ""},
		{"held authentication failure", list(pod("a", unready, held(codes.AuthenticationFailed, `{"check":"model-probe"}`))), false, ReasonHeld, codes.AuthenticationFailed},
		{"held on a ready pod still held", list(pod("a", held(codes.LoginFailed, ""))), false, ReasonHeld, codes.LoginFailed},
		{"held unknown code is malformed", list(pod("a", held("SOMETHING_ELSE", ""))), false, ReasonMalformedPod, ""},
		{"held bad message is malformed", list(pod("a", held(codes.ModelProbeFailed, "{not json"))), false, ReasonMalformedPod, ""},
		{"held bad cause kind is malformed", list(pod("a", held(codes.ModelProbeFailed, `{"check":"model-probe","cause":{"kind":"NOPE","detail":"x"}}`))), false, ReasonMalformedPod, ""},
		{"held condition false is not held", list(pod("a", cond(corev1.PodCondition{Type: ConditionRuntimeFailure, Status: corev1.ConditionFalse}))), true, ReasonReady, ""},
		{"duplicate held condition is malformed", list(pod("a", held(codes.LoginFailed, ""), held(codes.LoginFailed, ""))), false, ReasonMalformedPod, ""},
		{"held with two candidates blocks as multiple", list(pod("a", held(codes.LoginFailed, "")), pod("b")), false, ReasonMultipleCandidate, ""},
	}
	require.GreaterOrEqual(t, len(cases), 20)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ProviderHarnessReady(c.list, "dp", wantLabels)
			require.Equal(t, c.ready, r.Ready, "ready")
			require.Equal(t, c.reason, r.Reason, "reason")
			require.Equal(t, c.held, r.HeldCode, "held code")
		})
	}
}

func TestHeldCauseIsReported(t *testing.T) {
	msg := `{"check":"model-probe","cause":{"kind":"PROCESS_EXIT","detail":"exit-1"}}`
	r := ProviderHarnessReady(list(pod("a", unready, held(codes.ModelProbeFailed, msg))), "dp", wantLabels)
	require.Equal(t, codes.ModelProbeFailed, r.HeldCode)
	require.NotNil(t, r.Cause)
	require.Equal(t, codes.CauseProcessExit, r.Cause.Kind)
	require.Equal(t, "exit-1", r.Cause.Detail)
}
