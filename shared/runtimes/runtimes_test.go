package runtimes

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEnsureFindsPinnedRuntimes(t *testing.T) {
	p, err := Ensure(context.Background())
	require.NoError(t, err)
	out, err := exec.Command(p.Node, "--version").Output()
	require.NoError(t, err)
	require.Equal(t, "v"+NodeVersion, strings.TrimSpace(string(out)))
	out, err = exec.Command(p.Codex, "--version").Output()
	require.NoError(t, err)
	require.Contains(t, string(out), CodexVersion)
	require.Contains(t, p.OpenClawMJS, "openclaw-"+OpenClawVersion)
	require.FileExists(t, p.Tini)
}

func TestCacheDirHonoursXDG(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/x/cache")
	require.Equal(t, "/x/cache/oce", CacheDir())
}
