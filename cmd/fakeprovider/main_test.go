package main

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"oce.dev/oce/shared/netns"

	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	if os.Getenv("FAKEPROVIDER_RUN_MAIN") == "1" {
		main()
		return
	}
	netns.Main(m, netns.Options{HostNetwork: true})
}

// run starts this test binary as the fakeprovider command.
func run(t *testing.T, args ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], args...)
	cmd.Env = append(os.Environ(), "FAKEPROVIDER_RUN_MAIN=1")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	return cmd, bufio.NewReader(out)
}

func TestServesUntilSIGTERM(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(keys, []byte("k1\n"), 0o600))
	cmd, out := run(t, "--valid-key-file", keys, "--fault", "500")
	line, err := out.ReadString('\n')
	require.NoError(t, err)
	require.Regexp(t, `^PORT \d+\n$`, line)
	url := "http://127.0.0.1:" + strings.TrimSpace(strings.TrimPrefix(line, "PORT ")) + "/v1/responses"

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(`{"model":"m","input":"x"}`))
	req.Header.Set("Authorization", "Bearer wrong")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "keys come from the file")
	req, _ = http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(`{"model":"m","input":"x"}`))
	req.Header.Set("Authorization", "Bearer k1")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode, "--fault applies")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "SIGTERM ends serving cleanly")
}

func TestRejectsBadInput(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(keys, []byte("k1\n"), 0o644))
	for _, args := range [][]string{
		{"--valid-key-file", keys},
		{"--fault", "nope"},
		{"--addr", "0.0.0.0:0"},
		{"extra-arg"},
	} {
		cmd, _ := run(t, args...)
		err := cmd.Wait()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, args)
		require.Equal(t, 2, ee.ExitCode(), args)
	}
}
