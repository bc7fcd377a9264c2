package kubernetes

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

// probeStatus plays kubelet for the probe Pod: a UID, Running, and Ready
// since at (or a held failure with code).
func probeStatus(t *testing.T, cs *fake.Clientset, p *plan, ready bool, at time.Time, held codes.Code) {
	t.Helper()
	ctx := context.Background()
	pod, err := cs.CoreV1().Pods(p.gw).Get(ctx, p.probeName(), metav1.GetOptions{})
	require.NoError(t, err)
	pod.UID = types.UID("uid-probe-" + p.rev.ID)
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(at)}}}
	if held != "" {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: ConditionRuntimeFailure,
			Status: corev1.ConditionTrue, Reason: string(held), Message: `{"check":"model-probe"}`})
	}
	_, err = cs.CoreV1().Pods(p.gw).Update(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// activeEmbedded prepares and activates the embedded revision r1 (its
// Gateway Pod planted Ready) and returns its plan.
func activeEmbedded(t *testing.T, d *Driver, cs *fake.Clientset) *plan {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	r1 := embeddedRev("r1")
	require.NoError(t, d.PrepareRevision(ctx, r1))
	p1, err := d.planFor(r1)
	require.NoError(t, err)
	_, ok := probeOf(t, cs, p1)
	require.False(t, ok, "the Agent's first Gateway probes at its own start: nothing serves yet")
	addPod(t, cs, p1.gw, "gateway-r1", p1.gatewayPodLabels(), true)
	require.NoError(t, d.ActivateRevision(ctx, r1))
	return p1
}

// prepared runs one preparation pass of rev and returns its plan.
func prepared(t testing.TB, d *Driver, rev state.Revision) *plan {
	t.Helper()
	require.NoError(t, d.PrepareRevision(context.Background(), rev))
	p, err := d.planFor(rev)
	require.NoError(t, err)
	return p
}

func probeOf(t *testing.T, cs *fake.Clientset, p *plan) (*corev1.Pod, bool) {
	t.Helper()
	pod, err := cs.CoreV1().Pods(p.gw).Get(context.Background(), p.probeName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	require.NoError(t, err)
	return pod, true
}

// TestProbeBeforeCutover (issue 23): a staged embedded replacement's model
// probe runs in its own Pod — probe-only gatewayd, the revision's
// credential, no Agent state, its own policy — while the predecessor
// serves; the revision is ready once that Pod is, and the Gateway it is
// switched to carries when the probe passed; a held probe fails the
// revision without touching the serving Gateway.
func TestProbeBeforeCutover(t *testing.T) {
	d, cs, _ := newFakeStatus(t)
	d.cfg.ProbeBeforeCutover = true
	ctx := context.Background()
	activeEmbedded(t, d, cs)

	r2 := embeddedRev("r2")
	p2 := prepared(t, d, r2)
	pod, ok := probeOf(t, cs, p2)
	require.True(t, ok, "a staged replacement gets a probe Pod")
	require.Equal(t, "r1", gatewayOf(t, cs, p2.gw).Labels[LabelRevision], "the predecessor keeps serving")
	require.Equal(t, RoleProbe, pod.Labels[LabelRole])
	require.Equal(t, "r2", pod.Labels[LabelRevision])
	require.Equal(t, corev1.RestartPolicyNever, pod.Spec.RestartPolicy)
	require.Equal(t, "1", podEnv(pod.Spec, contract.EnvModelProbeOnly))
	require.Contains(t, projectedSecrets(pod.Spec), p2.n.harnessSecrets, "the revision's own credential")
	for _, v := range pod.Spec.Volumes {
		require.Nil(t, v.PersistentVolumeClaim, "no Agent state: %s", v.Name)
	}
	selected := true
	for k, v := range p2.gwPodSel {
		selected = selected && pod.Labels[k] == v
	}
	require.False(t, selected, "neither the Gateway Service nor its Deployment selects the probe")
	np, err := cs.NetworkingV1().NetworkPolicies(p2.gw).Get(ctx, p2.probeName(), metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, p2.probeLabels(), np.Spec.PodSelector.MatchLabels)
	require.ElementsMatch(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, np.Spec.PolicyTypes)
	require.Empty(t, np.Spec.Ingress, "nothing reaches the probe")
	rt, err := cs.NetworkingV1().NetworkPolicies(p2.gw).Get(ctx, p2.n.policyRuntime, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, rt.Spec.Egress, np.Spec.Egress, "the Gateway's model egress, nothing more")

	obs, err := d.ObserveRevision(ctx, r2)
	require.NoError(t, err)
	require.False(t, obs.Ready)
	require.True(t, strings.HasPrefix(obs.Reason, ReasonProbing), obs.Reason)
	passed := time.UnixMilli(1_700_000_000_000)
	probeStatus(t, cs, p2, true, passed, "")
	obs, err = d.ObserveRevision(ctx, r2)
	require.NoError(t, err)
	require.True(t, obs.Ready, obs.Reason)
	require.True(t, obs.Staged)

	require.NoError(t, d.ActivateRevision(ctx, r2))
	gw := gatewayOf(t, cs, p2.gw)
	require.Equal(t, "r2", gw.Labels[LabelRevision])
	require.Equal(t, strconv.FormatInt(passed.UnixMilli(), 10), podEnv(gw.Spec.Template.Spec, contract.EnvModelProbePassedAt),
		"the Gateway does not probe again")
	require.Empty(t, podEnv(gw.Spec.Template.Spec, contract.EnvModelProbeOnly))
	_, ok = probeOf(t, cs, p2)
	require.False(t, ok, "the probe Pod is deleted at the cutover")

	// a key only a model turn refuses: held before the cutover
	rollGateway(t, cs, p2, "gateway-r2")
	r3 := embeddedRev("r3")
	p3 := prepared(t, d, r3)
	probeStatus(t, cs, p3, false, passed, codes.AuthenticationFailed)
	obs, err = d.ObserveRevision(ctx, r3)
	require.NoError(t, err)
	require.False(t, obs.Ready)
	require.Equal(t, codes.AuthenticationFailed, obs.HeldCode)
	require.Equal(t, "r2", gatewayOf(t, cs, p3.gw).Labels[LabelRevision], "the serving Gateway is untouched")
	res, err := d.StopRevision(ctx, r3)
	require.NoError(t, err)
	require.True(t, res.Stopped)
	_, ok = probeOf(t, cs, p3)
	require.False(t, ok, "stopping the revision deletes its probe")
	require.Equal(t, "r2", gatewayOf(t, cs, p3.gw).Labels[LabelRevision], "stopping a staged revision leaves the serving Gateway")

	// a probe Pod that vanished is created again by the next pass
	r4 := embeddedRev("r4")
	p4 := prepared(t, d, r4)
	require.NoError(t, cs.CoreV1().Pods(p4.gw).Delete(ctx, p4.probeName(), metav1.DeleteOptions{}))
	obs, err = d.ObserveRevision(ctx, r4)
	require.NoError(t, err)
	require.Equal(t, ReasonProbing, obs.Reason)
	require.NoError(t, d.PrepareRevision(ctx, r4))
	_, ok = probeOf(t, cs, p4)
	require.True(t, ok)
}

// Without ProbeBeforeCutover (the seeds' order) a staged replacement is
// ready at once and no probe Pod is made.
func TestNoProbeInTheSeedOrder(t *testing.T) {
	d, cs, _ := newFakeStatus(t)
	ctx := context.Background()
	activeEmbedded(t, d, cs)
	r2 := embeddedRev("r2")
	p2 := prepared(t, d, r2)
	_, ok := probeOf(t, cs, p2)
	require.False(t, ok)
	obs, err := d.ObserveRevision(ctx, r2)
	require.NoError(t, err)
	require.True(t, obs.Ready && obs.Staged, obs.Reason)
}
