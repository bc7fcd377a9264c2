package proc

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStartRecordAndStop(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", "sleep 600 & echo started; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p, err := Start(cmd, "test", filepath.Join(dir, "log"))
	require.NoError(t, err)
	require.NotZero(t, p.StartTime)
	require.True(t, p.Alive())
	require.Eventually(t, func() bool { return len(Descendants(p.PID)) == 1 }, 5*time.Second, 10*time.Millisecond)
	child := Descendants(p.PID)[0]

	// The record survives a JSON round trip (another process adopting it).
	b, err := json.Marshal(p)
	require.NoError(t, err)
	var adopted Process
	require.NoError(t, json.Unmarshal(b, &adopted))
	require.True(t, adopted.Alive())
	require.False(t, (&Process{PID: p.PID, StartTime: p.StartTime + 1}).Alive(), "a reused pid is not the recorded process")

	// sh exits on SIGTERM; its sleep child outlives it and is killed after the grace.
	gone, err := Stop(context.Background(), p, 5*time.Second, 100*time.Millisecond, 10*time.Millisecond)
	require.NoError(t, err)
	require.False(t, gone, "the orphaned child had to be killed")
	require.False(t, p.Alive())
	require.False(t, child.Alive())
	st, err := os.Stat(filepath.Join(dir, "log"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
}

func TestStopNil(t *testing.T) {
	gone, err := Stop(context.Background(), nil, time.Second, time.Second, time.Millisecond)
	require.NoError(t, err)
	require.True(t, gone)
	require.False(t, (*Process)(nil).Alive())
}
