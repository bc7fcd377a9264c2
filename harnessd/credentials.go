package harnessd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"oce.dev/oce/shared/contract"
)

// Where credentials live (docs/credentials.md). CODEX_HOME holds Codex's
// login state (auth.json) and is ephemeral: every login mode harnessd
// supports is an API key or an access token, whose state docs/design/seed-001.md keeps
// ephemeral, so harnessd empties CODEX_HOME at every start, logs in again
// from the Secret, and empties it again on a hold or a stop. Codex's thread
// history (its SQLite state and session rollouts) is durable only in
// OCE_CODEX_STATE_DIR, which holds no credential. Neither, nor the node's
// state directory, may lie inside the workspace the companion node serves.

// CodexSessionsDir is Codex's rollout directory under CODEX_HOME; with a
// durable state directory it is a link to the directory of that name there.
const CodexSessionsDir = "sessions"

// LegacyNodeStateDir is where node identities lived inside the workspace
// before they moved out; harnessd removes it at start.
const LegacyNodeStateDir = contract.LegacyNodeStateDirName

func inside(path, root string) bool {
	path, root = filepath.Clean(path), filepath.Clean(root)
	return path == root || strings.HasPrefix(path, root+"/")
}

// checkPlacement refuses credential or Codex state directories inside the
// workspace (which the node serves and Codex's tools work in), and a
// CODEX_HOME that contains the workspace (it is emptied at every start).
func (cfg *Config) checkPlacement() error {
	ws := cfg.Workspace
	for name, dir := range map[string]string{EnvCodexHome: cfg.CodexHome, EnvCodexState: cfg.CodexStateDir,
		EnvNodehostState: cfg.NodehostStateDir} {
		if dir == "" {
			continue
		}
		if !filepath.IsAbs(dir) {
			return fmt.Errorf("%w: %s must be absolute", ErrConfig, name)
		}
		if inside(dir, ws) || inside(ws, dir) {
			return fmt.Errorf("%w: %s must lie outside the workspace", ErrConfig, name)
		}
	}
	if cfg.CodexStateDir != "" && (inside(cfg.CodexStateDir, cfg.CodexHome) || inside(cfg.CodexHome, cfg.CodexStateDir)) {
		return fmt.Errorf("%w: %s and %s must be separate", ErrConfig, EnvCodexState, EnvCodexHome)
	}
	return nil
}

// resetCodexHome empties CODEX_HOME (0700): no login state of an earlier
// start survives into this one. With a durable state directory it links
// sessions/ there.
func (h *harness) resetCodexHome() error {
	home := h.cfg.CodexHome
	if err := clearDir(home); err != nil {
		return err
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(home, 0o700); err != nil {
		return err
	}
	if st := h.cfg.CodexStateDir; st != "" {
		sessions := filepath.Join(st, CodexSessionsDir)
		if err := os.MkdirAll(sessions, 0o700); err != nil {
			return err
		}
		for _, d := range []string{st, sessions} {
			if err := os.Chmod(d, 0o700); err != nil {
				return err
			}
		}
		if err := os.Symlink(sessions, filepath.Join(home, CodexSessionsDir)); err != nil {
			return err
		}
	}
	return nil
}

// dropLoginState empties CODEX_HOME once Codex no longer runs (a hold or a
// stop): auth.json does not outlive the process that logged in.
func (h *harness) dropLoginState() {
	if !h.ownsHome {
		return
	}
	if err := clearDir(h.cfg.CodexHome); err != nil {
		h.log.Warn("could not empty CODEX_HOME", "error", err.Error())
	}
}

// clearDir removes everything in dir (a symlink entry is removed, never
// followed); a missing dir is fine.
func clearDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// removeLegacyNodeState deletes node identities an earlier version kept in
// the workspace, where the node served them to the Gateway and Codex's tools
// could read them. The node enrolls again with a fresh identity from the
// setup code the coordinator delivers.
func (h *harness) removeLegacyNodeState() error {
	p := filepath.Join(h.cfg.Workspace, LegacyNodeStateDir)
	st, err := os.Lstat(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode()&os.ModeSymlink != 0 {
		return os.Remove(p)
	}
	if err := os.RemoveAll(p); err != nil {
		return err
	}
	h.log.Warn("removed node credentials left inside the workspace by an earlier version")
	return nil
}
