package gatewayd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

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

// installCodexPlugin runs `openclaw plugins install` offline from the npm
// cache, then writes the full rendered config (keeping the gateway's meta).
// A stop is forwarded to the installer by the supervisor and ends startup.
func (g *Gatewayd) installCodexPlugin(ctx context.Context, full []byte) error {
	cmd := g.cfg.OpenClawCommand
	if len(cmd) == 0 {
		return phase.FailCheck(PhasePluginInstall, codes.Unavailable, fmt.Errorf("no openclaw command"))
	}
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
