package buildinfo

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/runtimes"
)

func TestRead(t *testing.T) {
	i := Read()
	require.Equal(t, runtime.Version(), i.GoVersion)
	require.NotEmpty(t, i.Version)
	require.Equal(t, runtimes.OpenClawVersion, i.Runtimes.OpenClaw)
	require.Equal(t, Runtimes{Node: runtimes.NodeVersion, OpenClaw: runtimes.OpenClawVersion, Codex: runtimes.CodexVersion}, Pinned())
}
