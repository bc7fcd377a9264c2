package gatewayd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/contract"
)

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

func TestPreInstallConfigDropsPluginsAndRouting(t *testing.T) {
	r, err := Render([]byte(`{"agents":{"defaults":{"model":"openai/gpt-5.5","models":{"openai/gpt-5.5":{"agentRuntime":{"id":"codex"}}}}}}`),
		RenderInput{Topology: contract.DedicatedCodex, Port: 1, Bind: "loopback", AppServerURL: "ws://h:1", AppServerToken: "tok"})
	require.NoError(t, err)
	pre, err := preInstallConfig(r.JSON)
	require.NoError(t, err)
	m := decode(t, pre)
	require.NotContains(t, m, "plugins", "the config must not name the codex plugin before it is installed")
	require.NotContains(t, m, "agents")
	require.Contains(t, m, "gateway")
	_, err = preInstallConfig([]byte("not json"))
	require.ErrorIs(t, err, ErrAdmittedConfig)
}

func TestKeepMetaAndMergeOnto(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "openclaw.json")
	rendered := []byte(`{"gateway":{"port":1},"plugins":{"entries":{"codex":{"enabled":true}}}}`)

	// no previous file: unchanged
	require.Equal(t, rendered, keepMeta(rendered, path))
	require.Equal(t, rendered, mergeOnto(path, rendered))

	require.NoError(t, os.WriteFile(path, []byte(`{"gateway":{"port":9,"x":1},"meta":{"lastTouchedVersion":"2026.9.6"},
		"plugins":{"installs":{"codex":{"source":"npm"}}}}`), 0o600))
	m := decode(t, keepMeta(rendered, path))
	require.Equal(t, map[string]any{"lastTouchedVersion": "2026.9.6"}, m["meta"])
	require.Equal(t, map[string]any{"port": float64(1)}, m["gateway"], "only meta is carried over")

	m = decode(t, mergeOnto(path, rendered))
	require.Equal(t, map[string]any{"lastTouchedVersion": "2026.9.6"}, m["meta"])
	require.Equal(t, map[string]any{"port": float64(1), "x": float64(1)}, m["gateway"], "rendered values win")
	require.Equal(t, map[string]any{"entries": map[string]any{"codex": map[string]any{"enabled": true}},
		"installs": map[string]any{"codex": map[string]any{"source": "npm"}}}, m["plugins"], "installer records stay")
}

func TestCodexPluginInstalled(t *testing.T) {
	dir := t.TempDir()
	require.False(t, codexPluginInstalled(dir))
	pkg := filepath.Join(dir, "npm", "projects", "openclaw-codex-1", "node_modules", "@openclaw", "codex")
	require.NoError(t, os.MkdirAll(pkg, 0o700))
	require.False(t, codexPluginInstalled(dir), "a directory without package.json is not an install")
	require.NoError(t, os.WriteFile(filepath.Join(pkg, "package.json"), []byte(`{}`), 0o600))
	require.True(t, codexPluginInstalled(dir))
}

// The codex plugin install phase through the real gatewayd binary and the
// fake CLI: installed once, offline, before the config names the plugin;
// the final config names it and keeps the installer's meta; a restart does
// not install again; a failed install holds UNAVAILABLE.
func TestCodexPluginInstallPhase(t *testing.T) {
	setup := func(t *testing.T) fakeRun {
		f := fakeSetup(t, contract.DedicatedCodex)
		require.NoError(t, os.WriteFile(filepath.Join(f.dir, "secrets", "app-server-token"), []byte("app-token-abcdef"), 0o600))
		f.env["OCE_APP_SERVER_URL"] = "ws://127.0.0.1:1"
		f.env["OCE_NPM_CACHE"] = filepath.Join(f.dir, "npm-cache")
		return f
	}
	t.Run("installs-then-configures", func(t *testing.T) {
		f := setup(t)
		p := startGW(t, f.dir, f.env)
		p.waitReady(20 * time.Second)
		require.Equal(t, 1, f.count("plugins-install "+CodexPluginSpec+" --force offline=true cache=true named=false"), f.lines())
		require.Contains(t, f.lines()[len(f.lines())-1], "npm_config_offline=true")
		m := decode(t, mustRead(t, filepath.Join(f.dir, "config", RenderedConfigName)))
		require.Equal(t, map[string]any{"lastTouchedVersion": "fake"}, m["meta"])
		codex := m["plugins"].(map[string]any)["entries"].(map[string]any)["codex"].(map[string]any)
		require.Equal(t, true, codex["enabled"])
		p.signal(syscall.SIGTERM)
		require.Equal(t, 0, p.waitExit(10*time.Second))

		p = startGW(t, f.dir, f.env)
		p.waitReady(20 * time.Second)
		require.Equal(t, 1, f.count("plugins-install "), "an installed plugin is not installed again")
		m = decode(t, mustRead(t, filepath.Join(f.dir, "config", RenderedConfigName)))
		require.Equal(t, map[string]any{"lastTouchedVersion": "fake"}, m["meta"], "a re-render keeps meta")
		p.signal(syscall.SIGTERM)
		require.Equal(t, 0, p.waitExit(10*time.Second))
	})
	t.Run("failure-holds", func(t *testing.T) {
		f := setup(t)
		f.env["FAKEOC_INSTALL_EXIT"] = "3"
		p := startGW(t, f.dir, f.env)
		require.Eventually(t, func() bool { return len(p.log.phase(PhasePluginInstall)) == 1 }, 20*time.Second, 20*time.Millisecond)
		r := p.log.phase(PhasePluginInstall)[0]
		require.Equal(t, "failed", r["outcome"])
		require.Equal(t, "UNAVAILABLE", r["code"])
		require.Equal(t, 0, f.count("gateway "))
		p.signal(syscall.SIGTERM)
		require.Equal(t, 0, p.waitExit(10*time.Second))
	})
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// A read-only npm cache (the gateway image's) is copied into the state dir
// for the installer and removed after; a writable one is used as is.
func TestWritableCacheCopiesAReadOnlyCache(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	require.NoError(t, os.MkdirAll(filepath.Join(cache, "_cacache", "index-v5"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(cache, "_cacache", "index-v5", "entry"), []byte("idx"), 0o644))
	require.NoError(t, os.Symlink("index-v5/entry", filepath.Join(cache, "_cacache", "link")))
	g := &Gatewayd{cfg: Config{Topology: contract.DedicatedCodex, NPMCache: cache, StateDir: filepath.Join(dir, "state")}}
	got, done, err := g.writableCache()
	require.NoError(t, err)
	require.Equal(t, cache, got, "a writable cache is used in place")
	done()

	// the test binary runs in a private mount namespace (netns.Main)
	require.NoError(t, syscall.Mount(cache, cache, "", syscall.MS_BIND, ""))
	defer syscall.Unmount(cache, syscall.MNT_DETACH)
	require.NoError(t, syscall.Mount("", cache, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""))
	got, done, err = g.writableCache()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "state", installCacheDir), got)
	b, err := os.ReadFile(filepath.Join(got, "_cacache", "link"))
	require.NoError(t, err)
	require.Equal(t, "idx", string(b))
	g.installCache = got
	require.Contains(t, g.gatewayEnv(false), "npm_config_cache="+got, "the installer gets the copy")
	done()
	_, err = os.Stat(got)
	require.True(t, os.IsNotExist(err), "the copy is removed after the install")
}
