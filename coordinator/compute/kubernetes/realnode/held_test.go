package realnode

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/internal/poll"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

// TestHeldFailureVisibleAndNeverRestarted runs an embedded revision's
// rendered Gateway Pod whose supervisor (oce's real status server) holds
// AUTHENTICATION_FAILED, as a bad key does. The driver reports the held
// code within seconds, through kubelet's probe Event (the Pod has no API
// credential); kubelet's startup probe passes, its readiness probe keeps
// failing, and the container is never restarted (a restart would repeat
// the login and the model probe). The startup budget is cut to 5 × 2 s so
// a restart would show within the test. Stopping the revision then
// delivers SIGTERM to the supervisor.
func TestHeldFailureVisibleAndNeverRestarted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d := newDriver(t)
	nsID, agentID := uid("ns-held"), uid("a")
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: nsID}))
	rev := embeddedRev(nsID, agentID, uid("r"))
	require.NoError(t, d.PrepareRevision(ctx, rev))
	ns := kdriver.DataPlaneNamespace(nsID)
	dep := patchTemplate(t, ns, deploymentOf(t, ns, agentID, kdriver.RoleGateway), func(s *corev1.PodSpec) {
		asPodbin(s, "held", corev1.EnvVar{Name: "HELD_CODE", Value: string(codes.AuthenticationFailed)})
		s.Containers[0].StartupProbe.FailureThreshold = 5
	})
	selector := metav1.FormatLabelSelector(dep.Spec.Selector)

	var pod *corev1.Pod
	require.Eventually(t, func() bool {
		pod = onePod(t, ns, selector)
		return pod != nil && len(pod.Status.ContainerStatuses) == 1 && pod.Status.ContainerStatuses[0].State.Running != nil
	}, 2*time.Minute, 100*time.Millisecond, "the Gateway container runs")
	started := pod.Status.ContainerStatuses[0].State.Running.StartedAt.Time

	var obsAt time.Time
	poll.Until(t, func() bool {
		obs, err := d.ObserveRevision(ctx, rev)
		require.NoError(t, err)
		require.False(t, obs.Ready)
		if obs.HeldCode != "" {
			require.Equal(t, codes.AuthenticationFailed, obs.HeldCode)
			obsAt = time.Now()
			return true
		}
		return false
	}, time.Minute, 200*time.Millisecond, "the held code is visible through the driver")
	t.Logf("held AUTHENTICATION_FAILED visible %v after the container started", obsAt.Sub(started).Round(100*time.Millisecond))

	// Readiness keeps failing well past the (cut) startup budget, and the
	// container is never restarted.
	require.Eventually(t, func() bool { return probeFailures(t, pod) >= 8 }, time.Minute, 200*time.Millisecond)
	cur := onePod(t, ns, selector)
	require.NotNil(t, cur)
	require.Equal(t, pod.UID, cur.UID)
	cs := cur.Status.ContainerStatuses[0]
	require.Zero(t, cs.RestartCount, "kubelet restarted a held container")
	require.NotNil(t, cs.Started)
	require.True(t, *cs.Started, "the startup probe passed for the held supervisor")
	require.False(t, cs.Ready)
	// The Secret files as kubelet delivers them under the rendered
	// fsGroup: root-owned, group-readable (defaultMode 0400 + fsGroup →
	// 0440, gid 1000), behind the volume's symlinked ..data layout. The
	// supervisors must accept exactly this (and still refuse
	// world-readable files).
	out, err := cluster.Exec(ctx, ns, cur.Name, "gateway", "/podbin", "stat", "/var/run/oce/secrets/"+contract.SecretGatewayPassword)
	require.NoError(t, err)
	require.Equal(t, "mode=0440 uid=0 gid=1000 symlink=true", strings.TrimSpace(out))
	logs, err := cluster.Logs(ctx, ns, cur.Name, "gateway", false)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(logs, "podbin: holding AUTHENTICATION_FAILED"), logs)

	// Stopping the revision delivers SIGTERM to the supervisor (PID 1 under
	// the rendered Pod), which exits; the Pod is gone when StopRevision returns.
	logLines, err := cluster.LogLines(ctx, ns, cur.Name, "gateway")
	require.NoError(t, err)
	res, err := d.StopRevision(ctx, rev)
	require.NoError(t, err)
	require.True(t, res.Stopped)
	got := logLines()
	require.Contains(t, got, "podbin: SIGTERM received")
	require.Nil(t, onePod(t, ns, selector))
}
