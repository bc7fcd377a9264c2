package supervise_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/supervise"
)

func TestRunCommand(t *testing.T) {
	ctx := context.Background()
	t.Run("stdin delivered", func(t *testing.T) {
		res, err := supervise.RunCommand(ctx, supervise.RunSpec{Path: helper, Args: []string{"echo-stdin"}, Stdin: []byte("token-on-stdin\n")})
		require.NoError(t, err)
		require.Equal(t, "token-on-stdin\n", string(res.Stdout))
		require.True(t, res.Status.Success())
	})
	t.Run("exit code", func(t *testing.T) {
		res, err := testSup.Run(ctx, supervise.RunSpec{Path: helper, Args: []string{"exit", "4"}})
		require.NoError(t, err)
		require.Equal(t, 4, res.Status.ShellCode())
	})
	t.Run("under cap", func(t *testing.T) {
		res, err := supervise.RunCommand(ctx, supervise.RunSpec{Path: helper, Args: []string{"spew", "1000", "exit"}, OutputLimit: 1000})
		require.NoError(t, err)
		require.Len(t, res.Stdout, 1000)
		require.False(t, res.OutputLimited)
	})
	t.Run("over cap kills", func(t *testing.T) {
		res, err := supervise.RunCommand(ctx, supervise.RunSpec{Path: helper, Args: []string{"spew", strconv.Itoa(1 << 20), "block"}})
		require.ErrorIs(t, err, supervise.ErrOutputLimit)
		require.True(t, res.OutputLimited)
		require.Len(t, res.Stdout, supervise.DefaultOutputLimit)
		require.Equal(t, bytes.Repeat([]byte("x"), supervise.DefaultOutputLimit), res.Stdout)
		require.Equal(t, syscall.SIGKILL, res.Status.Signal)
	})
	t.Run("deadline kills grandchildren", func(t *testing.T) {
		res, err := supervise.RunCommand(ctx, supervise.RunSpec{Path: helper, Args: []string{"ignore-term", "3"}, Timeout: 500 * time.Millisecond})
		require.ErrorIs(t, err, supervise.ErrTimeout)
		require.True(t, res.TimedOut)
		require.Equal(t, syscall.SIGKILL, res.Status.Signal)
		line, _, _ := strings.Cut(string(res.Stdout), "\n")
		pids := pidsOf(t, line)
		require.Len(t, pids, 4)
		require.Eventually(t, func() bool { return gone(pids) }, 30*time.Second, 10*time.Millisecond)
	})
	t.Run("ctx cancel kills", func(t *testing.T) {
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		res, err := supervise.RunCommand(cctx, supervise.RunSpec{Path: "/bin/sleep", Args: []string{"1000"}})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, syscall.SIGKILL, res.Status.Signal)
	})
	t.Run("bad spec", func(t *testing.T) {
		_, err := supervise.RunCommand(ctx, supervise.RunSpec{Path: "/bin/true", OutputLimit: -1})
		require.ErrorIs(t, err, supervise.ErrInvalidSpec)
		_, err = supervise.RunCommand(ctx, supervise.RunSpec{Path: "no-such-program-oce"})
		require.ErrorIs(t, err, supervise.ErrNotFound)
	})
}

// A secret passed on stdin reaches the child but appears in no process's
// argv or environment while the child runs.
func TestRunCommandSecretOnlyOnStdin(t *testing.T) {
	secret := "oce-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	ready := filepath.Join(t.TempDir(), "ready")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type out struct {
		res supervise.RunResult
		err error
	}
	done := make(chan out, 1)
	env := supervise.Env(os.Environ(), "OCE_*")
	go func() {
		res, err := supervise.RunCommand(ctx, supervise.RunSpec{Path: helper, Args: []string{"secret-wait", ready}, Env: env, Stdin: []byte(secret)})
		done <- out{res, err}
	}()
	var line string
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(ready)
		line = string(b)
		return err == nil
	}, 30*time.Second, 10*time.Millisecond)
	var pid int
	var sum string
	_, err := fmt.Sscanf(line, "%d %s", &pid, &sum)
	require.NoError(t, err)
	want := sha256.Sum256([]byte(secret))
	require.Equal(t, hex.EncodeToString(want[:]), sum, "secret delivered on stdin")
	require.True(t, alive(pid))

	scanned := 0
	for p := range procTable() {
		for _, f := range []string{"cmdline", "environ"} {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", p, f))
			if err != nil {
				continue
			}
			if p == pid {
				scanned++
			}
			require.NotContains(t, string(b), secret, "secret in /proc/%d/%s", p, f)
		}
	}
	require.Equal(t, 2, scanned, "the child's cmdline and environ were read")
	cancel()
	o := <-done
	require.ErrorIs(t, o.err, context.Canceled)
	require.Equal(t, syscall.SIGKILL, o.res.Status.Signal)
}
