package occ

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	osexec "os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/shared/proc"
)

func runOcc(t *testing.T, env map[string]string, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	code := Main(t.Context(), args, Options{Stdout: &out, Stderr: &out, WorkDir: t.TempDir(),
		ConfigFile: filepath.Join(t.TempDir(), "none.yaml"), Getenv: func(k string) string { return env[k] }})
	return out.String(), code
}

func TestDevUpRefusesRealProviderWithoutOptIn(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	out, code := runOcc(t, map[string]string{"OPENAI_API_KEY": "sk-real"}, "dev", "up", "--dir", dir)
	require.Equal(t, ExitUsage, code, out)
	require.Contains(t, out, "--allow-host-network")
	require.NoDirExists(t, dir, "a refused dev up changes nothing")
}

func TestDevDownWithoutInstance(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "runtimes"), 0o700))
	out, code := runOcc(t, nil, "dev", "down", "--dir", dir)
	require.Equal(t, ExitOK, code, out)
	require.DirExists(t, dir, "down keeps the data")
	out, code = runOcc(t, nil, "dev", "down", "--dir", dir, "--purge")
	require.Equal(t, ExitOK, code, out)
	require.NoDirExists(t, dir, "--purge removes the data")
}

func TestDevDownStopsRecordedRuntimes(t *testing.T) {
	dir := t.TempDir()
	// A "supervisor" the local driver recorded, outliving its coordinator.
	cmd := startCmd(t, "sleep", "600")
	st, err := proc.StartTime(cmd.Process.Pid)
	require.NoError(t, err)
	runDir := filepath.Join(dir, "runtimes", "ns", "agent", "revisions", "rev")
	require.NoError(t, os.MkdirAll(runDir, 0o700))
	b, _ := json.Marshal(map[string]any{"gateway": map[string]any{"pid": cmd.Process.Pid, "startTime": st}})
	require.NoError(t, os.WriteFile(filepath.Join(runDir, "run.json"), b, 0o600))
	var out bytes.Buffer
	require.NoError(t, devDown(context.Background(), &out, dir, false))
	require.False(t, (&proc.Process{PID: cmd.Process.Pid, StartTime: st}).Alive(), "the recorded supervisor is gone")
}

func TestSendWithoutRoute(t *testing.T) {
	_, err := SendAndCollect(t.Context(), wire.Endpoints{AgentID: "agent1", Gateway: "ws://gw.ns.svc:18789"}, "main", "hi", &bytes.Buffer{}, nil)
	require.ErrorContains(t, err, "no gateway socket on this machine")
}

func startCmd(t *testing.T, name string, args ...string) *osexec.Cmd {
	t.Helper()
	cmd := osexec.Command(name, args...)
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd
}

func TestFreeLoopbackAvoidsReservedPorts(t *testing.T) {
	first, err := freeLoopback()
	require.NoError(t, err)
	for range 20 {
		got, err := freeLoopback(first)
		require.NoError(t, err)
		require.NotEqual(t, first, got, "a reserved port is never handed out")
	}
}
