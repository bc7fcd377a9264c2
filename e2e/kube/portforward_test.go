package kube

import (
	"bufio"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"oce.dev/oce/shared/logtest"
)

// portForwardListenWait bounds how long kubectl port-forward may take to
// say it listens.
const portForwardListenWait = time.Minute

// portForward is a running `kubectl port-forward`.
type portForward struct {
	stop   func()
	stderr logtest.Buffer
}

// startPortForward runs `kubectl port-forward args…` in the node's
// namespaces and returns once kubectl prints a "Forwarding from <prefix>"
// line; its stop cancels it and waits for kubectl to exit.
func startPortForward(t *testing.T, args []string, prefix string) *portForward {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pf := cluster.Command(ctx, filepath.Join(cluster.BinDir, "kubectl"), args...)
	stdout, err := pf.StdoutPipe()
	require.NoError(t, err)
	p := &portForward{}
	pf.Stderr = &p.stderr
	require.NoError(t, pf.Start())
	exited := make(chan error, 1)
	go func() { exited <- pf.Wait() }()
	p.stop = func() {
		cancel()
		<-exited
	}
	forwarding := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "Forwarding from "+prefix) {
				close(forwarding)
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case <-forwarding:
	case err := <-exited:
		cancel()
		require.Failf(t, "kubectl port-forward ended", "%v: %s", err, p.stderr.String())
	case <-time.After(portForwardListenWait):
		p.stop()
		require.Failf(t, "kubectl port-forward never listened", "%s", p.stderr.String())
	}
	return p
}
