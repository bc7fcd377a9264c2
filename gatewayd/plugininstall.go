package gatewayd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/logging"
	"oce.dev/oce/shared/phase"
	"oce.dev/oce/shared/supervise"
)

// CodexPluginSpec is the gateway's codex plugin: openclaw does not bundle it,
// so dedicated Codex installs it (managed, into the state dir) from the npm
// cache the runtimes provide (docs/OPERATIONS.md).
const CodexPluginSpec = "npm:@openclaw/codex@2026.9.5"

const pluginInstallChildName = "openclaw-plugins-install"

// codexPluginInstalled reports a managed install of the codex plugin under
// the state dir ($OPENCLAW_STATE_DIR/npm/projects/*/node_modules/@openclaw/codex).
func codexPluginInstalled(stateDir string) bool {
	m, _ := filepath.Glob(filepath.Join(stateDir, "npm", "projects", "*", "node_modules", "@openclaw", "codex", "package.json"))
	return len(m) > 0
}

// needsCodexInstall: dedicated Codex with an offline npm cache and no
// installed plugin yet.
func (g *Gatewayd) needsCodexInstall() bool {
	return g.cfg.Topology == contract.DedicatedCodex && g.cfg.NPMCache != "" && !codexPluginInstalled(g.cfg.StateDir)
}

// preInstallConfig is the rendered config without the plugin entries and
// agent routing: the gateway refuses `plugins install` while the config names
// a plugin that is not installed yet.
func preInstallConfig(rendered []byte) ([]byte, error) {
	var cfg map[string]any
	if err := json.Unmarshal(rendered, &cfg); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAdmittedConfig, err)
	}
	delete(cfg, "plugins")
	delete(cfg, "agents")
	return json.MarshalIndent(cfg, "", "  ")
}

// keepMeta carries the `meta` object the gateway wrote into the config at
// path over into rendered (a rewrite that drops it is undone by the gateway
// from openclaw.json.bak). rendered is returned unchanged when there is none.
func keepMeta(rendered []byte, path string) []byte {
	old, err := os.ReadFile(path)
	if err != nil {
		return rendered
	}
	var prev map[string]any
	if json.Unmarshal(old, &prev) != nil {
		return rendered
	}
	meta, ok := prev["meta"].(map[string]any)
	if !ok {
		return rendered
	}
	var cfg map[string]any
	if json.Unmarshal(rendered, &cfg) != nil {
		return rendered
	}
	if _, has := cfg["meta"]; has {
		return rendered
	}
	cfg["meta"] = meta
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return rendered
	}
	return b
}

// mergeOnto deep-merges rendered over the config at path (what the installer
// wrote into it, meta included, stays), as the verified recipe does.
func mergeOnto(path string, rendered []byte) []byte {
	old, err := os.ReadFile(path)
	if err != nil {
		return rendered
	}
	var cur, want map[string]any
	if json.Unmarshal(old, &cur) != nil || cur == nil || json.Unmarshal(rendered, &want) != nil {
		return rendered
	}
	merge(cur, want)
	b, err := json.MarshalIndent(cur, "", "  ")
	if err != nil {
		return rendered
	}
	return b
}

func merge(dst, src map[string]any) {
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			if dv, ok := dst[k].(map[string]any); ok {
				merge(dv, sv)
				continue
			}
		}
		dst[k] = v
	}
}

// npmCache is the npm cache children get: the installer's writable copy
// while it runs, else the configured one.
func (g *Gatewayd) npmCache() string {
	if g.installCache != "" {
		return g.installCache
	}
	return g.cfg.NPMCache
}

// installCacheDir is where a read-only npm cache is copied for the
// installer (in the state dir: the image's /tmp is small); removed after.
const installCacheDir = ".oce-npm-cache"

// writableCache returns an npm cache the installer can use: the configured
// one when this process may write it, else a copy in the state dir (npm
// writes index entries and logs into its cache even offline, and answers
// ENOTCACHED from a read-only one — the gateway image's cache is on the
// read-only root). done removes the copy.
func (g *Gatewayd) writableCache() (dir string, done func(), err error) {
	src := g.cfg.NPMCache
	if err := unix.Access(src, unix.W_OK); err == nil || errors.Is(err, fs.ErrNotExist) {
		return src, func() {}, nil // writable, or missing: npm reports that
	}
	dst := filepath.Join(g.cfg.StateDir, installCacheDir)
	_ = os.RemoveAll(dst)
	if err := copyTree(src, dst); err != nil {
		_ = os.RemoveAll(dst)
		return "", nil, fmt.Errorf("copy the read-only npm cache: %w", err)
	}
	return dst, func() { _ = os.RemoveAll(dst) }, nil
}

// copyTree copies directories, regular files and symlinks of src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o700)
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, to)
		case d.Type().IsRegular():
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			defer in.Close()
			out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, in); err != nil {
				out.Close()
				return err
			}
			return out.Close()
		}
		return nil // sockets, devices: not in an npm cache
	})
}

// installCodexPlugin runs `openclaw plugins install` offline from the npm
// cache, then writes the full rendered config (keeping the gateway's meta).
// A stop is forwarded to the installer by the supervisor and ends startup.
func (g *Gatewayd) installCodexPlugin(ctx context.Context, full []byte) error {
	cmd := g.cfg.OpenClawCommand
	if len(cmd) == 0 {
		return phase.FailCheck(PhasePluginInstall, codes.Unavailable, fmt.Errorf("no openclaw command"))
	}
	cache, done, err := g.writableCache()
	if err != nil {
		return phase.FailCheck(PhasePluginInstall, codes.Unavailable, err)
	}
	g.installCache = cache
	defer func() { g.installCache = ""; done() }()
	out := logging.LineWriter(g.log, "stdout", nil)
	errw := logging.LineWriter(g.log, "stderr", nil)
	defer out.Close()
	defer errw.Close()
	p, err := g.sup.Start(ctx, supervise.Spec{Name: pluginInstallChildName, Path: cmd[0],
		Args: append(append([]string{}, cmd[1:]...), "plugins", "install", CodexPluginSpec, "--force"),
		Env:  g.gatewayEnv(false), Dir: g.cfg.StateDir, Stdout: out, Stderr: errw, StopBudget: DoctorStopBudget})
	if err != nil {
		return phase.FailCheck(PhasePluginInstall, codes.Unavailable, err)
	}
	st, err := p.Wait(context.Background())
	if err != nil {
		return phase.FailCheck(PhasePluginInstall, codes.Unavailable, err)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if !st.Success() || !codexPluginInstalled(g.cfg.StateDir) {
		return phase.FailCheck(PhasePluginInstall, codes.Unavailable, fmt.Errorf("plugins install %s: %s", CodexPluginSpec, st))
	}
	if _, _, err := writeRendered(g.cfg.ConfigDir, mergeOnto(g.renderedPath, full)); err != nil {
		return phase.FailCheck(PhasePluginInstall, codes.Unavailable, err)
	}
	return nil
}
