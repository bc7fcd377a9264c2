package k8stest

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStartStop starts a control plane, checks the fake Node, the default
// StorageClass and the server version, and stops exactly the processes it
// started.
func TestStartStop(t *testing.T) {
	ctx := context.Background()
	startAt := time.Now()
	e, err := Start(ctx)
	t.Logf("started in %v", time.Since(startAt))
	require.NoError(t, err)
	pids := e.PIDs()
	require.Len(t, pids, 5)
	v, err := e.Client.Discovery().ServerVersion()
	require.NoError(t, err)
	require.Equal(t, "v1.37.2", v.GitVersion)
	n, err := e.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	ready := false
	for _, c := range n.Status.Conditions {
		ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
	}
	require.True(t, ready)
	sc, err := e.Client.StorageV1().StorageClasses().Get(ctx, StorageClassName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "true", sc.Annotations["storageclass.kubernetes.io/is-default-class"])
	require.Equal(t, storagev1.VolumeBindingWaitForFirstConsumer, *sc.VolumeBindingMode)
	dir := e.Dir
	stopAt := time.Now()
	require.NoError(t, e.Stop())
	t.Logf("stopped in %v", time.Since(stopAt))
	for name, pid := range pids {
		require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "%s (pid %d) still running", name, pid)
	}
	_, err = os.Stat(dir)
	require.True(t, os.IsNotExist(err))
}
