package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// demoNamespace keeps the quickstart's Agents (hello, coder) apart from the
// other tests' in the shared environment.
const demoNamespace = "demo"

// TestMakeDemo runs the quickstart, scripts/demo.sh (what `make demo` runs
// after building), against the shared process-based `occ dev up`: its own
// `occ dev up` finds the running coordinator, then it deploys an embedded
// OpenClaw and a dedicated Codex Agent and sends each a message through the
// real gateway. It reuses the environment rather than starting a second
// one; the Agents are deleted afterwards.
func TestMakeDemo(t *testing.T) {
	e := &shared
	e.up(t)
	e.mustOcc(t, "namespace", "create", demoNamespace)
	root, err := moduleRoot()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "demo.sh"))
	cmd.Env = append(os.Environ(), "OCC="+filepath.Join(e.bin, "occ"), "OCE_DEMO_DIR="+e.devDir(),
		"OCE_DEMO_ADDR="+e.addr, "OCC_NAMESPACE="+demoNamespace)
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() {
		for _, a := range []string{"hello", "coder"} {
			e.occ(t, "-n", demoNamespace, "agent", "delete", a)
		}
	})
	require.NoError(t, err, "%s", out)
	text := string(out)
	require.Contains(t, text, "oce dev is already running", "the demo found the process-based coordinator")
	hello, coder, ok := strings.Cut(text, "occ agent send coder")
	require.True(t, ok, text)
	_, hello, _ = strings.Cut(hello, "occ agent send hello")
	require.Contains(t, hello, FakeReply, "the embedded Agent answered with the fake provider's reply")
	require.Contains(t, coder, FakeReply, "the dedicated Codex Agent answered with the fake provider's reply")
	for _, a := range []string{"hello", "coder"} {
		var ag struct{ ActiveRevisionID string }
		e.getJSON(t, &ag, "-n", demoNamespace, "agent", "get", a)
		require.NotEmpty(t, ag.ActiveRevisionID, "%s is active", a)
	}
}
