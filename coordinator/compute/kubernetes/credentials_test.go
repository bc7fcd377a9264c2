package kubernetes

import (
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"oce.dev/oce/shared/contract"
)

// The Harness keeps no credential in the workspace its node serves: Codex's
// login state lives on the Pod's emptyDir (ephemeral, docs/design/seed-001.md), the node's
// identity and token and Codex's thread history on their own claim subPaths.
func TestHarnessCredentialsOutsideTheWorkspace(t *testing.T) {
	d, _ := newFake(t)
	p, err := d.planFor(dedicatedRev("r1"))
	require.NoError(t, err)
	dep := d.harnessDeployment(p, []string{contract.SecretOpenAIAPIKey})
	c := dep.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	mounts := map[string]string{} // mount path → volume/subPath
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name + "/" + m.SubPath
	}
	inside := func(p, root string) bool { return p == root || strings.HasPrefix(p, root+"/") }
	for _, k := range []string{"CODEX_HOME", "OCE_CODEX_STATE_DIR", "OCE_NODEHOST_STATE_DIR"} {
		require.NotEmpty(t, env[k], k)
		require.False(t, inside(env[k], env["OCE_WORKSPACE_DIR"]) || inside(env["OCE_WORKSPACE_DIR"], env[k]), k)
	}
	// CODEX_HOME is below /home/node, the runtime-state emptyDir, with no
	// claim mounted over it or between.
	require.Equal(t, "runtime-state/home", mounts[pathHome])
	for mp, src := range mounts {
		if strings.HasPrefix(src, "workspace/") {
			require.False(t, inside(env["CODEX_HOME"], mp) || inside(mp, env["CODEX_HOME"]), "claim mount %s at CODEX_HOME", mp)
		}
	}
	require.Equal(t, "workspace/codex-state", mounts[env["OCE_CODEX_STATE_DIR"]])
	require.Equal(t, "workspace/node-state", mounts[env["OCE_NODEHOST_STATE_DIR"]])
	require.Equal(t, "workspace/workspace", mounts[env["OCE_WORKSPACE_DIR"]])
	// The init container prepares each claim subPath 0700.
	script := dep.Spec.Template.Spec.InitContainers[0].Command[2]
	for _, sub := range []string{"workspace", "codex-state", "node-state"} {
		require.Contains(t, script, path.Join("/private", sub))
	}
	require.NotContains(t, script, "codex-home")
}
