package harnessd

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// No credential directory may lie in the workspace the node serves, and
// CODEX_HOME (emptied at every start) may not contain it.
func TestCheckPlacement(t *testing.T) {
	base := Config{Workspace: "/home/node/workspace", CodexHome: "/home/node/.codex",
		CodexStateDir: "/home/node/.codex-state", NodehostStateDir: "/home/node/.openclaw-node"}
	for _, tc := range []struct {
		name string
		edit func(c *Config)
		ok   bool
	}{
		{"the rendered layout", func(*Config) {}, true},
		{"no durable state", func(c *Config) { c.CodexStateDir = "" }, true},
		{"no node", func(c *Config) { c.NodehostStateDir = "" }, true},
		{"node state in the workspace", func(c *Config) { c.NodehostStateDir = "/home/node/workspace/.oce-node/a" }, false},
		{"codex home in the workspace", func(c *Config) { c.CodexHome = "/home/node/workspace/.codex" }, false},
		{"codex home is the workspace", func(c *Config) { c.CodexHome = "/home/node/workspace/" }, false},
		{"codex home contains the workspace", func(c *Config) { c.CodexHome = "/home/node" }, false},
		{"codex state in the workspace", func(c *Config) { c.CodexStateDir = "/home/node/workspace/state" }, false},
		{"codex state in codex home", func(c *Config) { c.CodexStateDir = "/home/node/.codex/state" }, false},
		{"relative codex home", func(c *Config) { c.CodexHome = "codex" }, false},
		{"a sibling that shares a prefix", func(c *Config) { c.CodexHome = "/home/node/workspace-codex" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.edit(&c)
			err := c.checkPlacement()
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrConfig)
			}
		})
	}
}

// CODEX_HOME is emptied at start (a stale auth.json and ready marker go),
// sessions/ links to the durable state, and the login state is dropped
// again on a stop without touching the thread history.
func TestCodexHomeIsEphemeral(t *testing.T) {
	dir := t.TempDir()
	h := &harness{cfg: Config{CodexHome: filepath.Join(dir, "home"), CodexStateDir: filepath.Join(dir, "state"),
		Workspace: filepath.Join(dir, "ws")}, log: slog.New(slog.DiscardHandler)}
	require.NoError(t, os.MkdirAll(filepath.Join(h.cfg.CodexHome, "log"), 0o755))
	for _, f := range []string{"auth.json", ReadyMarker, "log/codex.log"} {
		require.NoError(t, os.WriteFile(filepath.Join(h.cfg.CodexHome, f), []byte("stale"), 0o600))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(h.cfg.CodexStateDir, CodexSessionsDir, "2026"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(h.cfg.CodexStateDir, "state_5.sqlite"), []byte("db"), 0o600))

	h.dropLoginState()
	require.FileExists(t, filepath.Join(h.cfg.CodexHome, "auth.json"), "nothing is dropped before the home is owned")
	h.ownsHome = true
	require.NoError(t, h.resetCodexHome())
	ents, err := os.ReadDir(h.cfg.CodexHome)
	require.NoError(t, err)
	require.Len(t, ents, 1)
	require.Equal(t, CodexSessionsDir, ents[0].Name())
	link, err := os.Readlink(filepath.Join(h.cfg.CodexHome, CodexSessionsDir))
	require.NoError(t, err)
	require.Equal(t, filepath.Join(h.cfg.CodexStateDir, CodexSessionsDir), link)
	for _, d := range []string{h.cfg.CodexHome, h.cfg.CodexStateDir, link} {
		st, err := os.Stat(d)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), st.Mode().Perm(), d)
	}

	require.NoError(t, os.WriteFile(filepath.Join(h.cfg.CodexHome, "auth.json"), []byte("this start"), 0o600))
	h.dropLoginState()
	ents, err = os.ReadDir(h.cfg.CodexHome)
	require.NoError(t, err)
	require.Empty(t, ents)
	require.DirExists(t, filepath.Join(h.cfg.CodexStateDir, CodexSessionsDir, "2026"), "the link was removed, not followed")
	require.FileExists(t, filepath.Join(h.cfg.CodexStateDir, "state_5.sqlite"))
}

// Node credentials an earlier version kept in the workspace are removed.
func TestRemoveLegacyNodeState(t *testing.T) {
	dir := t.TempDir()
	h := &harness{cfg: Config{Workspace: dir}, log: slog.New(slog.DiscardHandler)}
	require.NoError(t, h.removeLegacyNodeState(), "nothing to remove")
	legacy := filepath.Join(dir, LegacyNodeStateDir, "agent")
	require.NoError(t, os.MkdirAll(legacy, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(legacy, "device-token"), []byte("tok"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "AGENTS.md"), []byte("keep"), 0o600))
	require.NoError(t, h.removeLegacyNodeState())
	_, err := os.Stat(filepath.Join(dir, LegacyNodeStateDir))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.FileExists(t, filepath.Join(dir, "AGENTS.md"))

	// A symlink in its place is removed, never followed.
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "keep"), nil, 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, LegacyNodeStateDir)))
	require.NoError(t, h.removeLegacyNodeState())
	require.FileExists(t, filepath.Join(outside, "keep"))
	_, err = os.Lstat(filepath.Join(dir, LegacyNodeStateDir))
	require.ErrorIs(t, err, os.ErrNotExist)
}
