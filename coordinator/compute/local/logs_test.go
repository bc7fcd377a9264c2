package local

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/logtest"
)

func TestLogsTailAndFollow(t *testing.T) {
	d := &Driver{cfg: Config{DataDir: t.TempDir()}}
	rev := state.Revision{ID: "rev1", AgentID: "agent1", NamespaceID: "ns1"}
	dir := d.RevisionDir(rev)
	require.NoError(t, os.MkdirAll(dir, 0o700))
	var lines []string
	for i := range 10 {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	logFile := filepath.Join(dir, "gateway.log")
	require.NoError(t, os.WriteFile(logFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600))

	var all bytes.Buffer
	require.NoError(t, d.Logs(t.Context(), rev, compute.LogOptions{Container: compute.ContainerGateway}, &all))
	require.Equal(t, strings.Join(lines, "\n")+"\n", all.String())

	var tail bytes.Buffer
	require.NoError(t, d.Logs(t.Context(), rev, compute.LogOptions{Container: compute.ContainerGateway, Tail: 3}, &tail))
	require.Equal(t, "line 7\nline 8\nline 9\n", tail.String())

	err := d.Logs(t.Context(), rev, compute.LogOptions{Container: compute.ContainerHarness}, &bytes.Buffer{})
	require.ErrorIs(t, err, compute.ErrNoLogs, "an embedded revision has no harness log")

	// Follow: what the supervisor appends arrives until ctx ends.
	ctx, cancel := context.WithCancel(context.Background())
	var out logtest.Buffer
	done := make(chan error, 1)
	go func() {
		done <- d.Logs(ctx, rev, compute.LogOptions{Container: compute.ContainerGateway, Tail: 1, Follow: true}, &out)
	}()
	require.Eventually(t, func() bool { return out.String() == "line 9\n" }, 5*time.Second, 10*time.Millisecond)
	f, err := os.OpenFile(logFile, os.O_APPEND|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	_, err = f.WriteString("appended\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Eventually(t, func() bool { return out.String() == "line 9\nappended\n" }, 5*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}
