package kube

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"oce.dev/oce/coordinator/api/wire"
)

// The bundle's StatefulSet formed one Raft cluster of three voters that occ
// reaches through the API Service, serving the Kubernetes driver.
func TestCoordinatorFromTheBundle(t *testing.T) {
	c, err := clusterView(t.Context())
	require.NoError(t, err)
	require.Len(t, c.Members, coordinatorReplicas)
	for _, m := range c.Members {
		require.Equal(t, "voter", m.Suffrage, "%+v", m)
		require.Contains(t, m.RaftAddr, ".oce-coordinator:7300", "members advertise their stable names")
	}
	var inst wire.Installation
	occJSON(t, &inst, "installation")
	require.NotNil(t, inst.Compute)
	require.Equal(t, "kubernetes", inst.Compute.Driver)
	pods, err := cluster.Client.CoreV1().Pods(SystemNS).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=oce-coordinator"})
	require.NoError(t, err)
	require.Len(t, pods.Items, coordinatorReplicas)
	for _, p := range pods.Items {
		if cs := p.Status.ContainerStatuses[0]; cs.RestartCount > 0 {
			prev, err := cluster.Logs(t.Context(), SystemNS, p.Name, cs.Name, true)
			require.Zero(t, cs.RestartCount, "%s never restarted; it last ended %+v (%v), its log:\n%s",
				p.Name, cs.LastTerminationState.Terminated, err, tail(prev, 6000))
		}
		sup, _ := podMemory(t, "coordinator Pod "+p.Name, &p)
		require.Positive(t, sup)
	}
}
