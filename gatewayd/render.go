package gatewayd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"oce.dev/oce/shared/atomicfile"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/modelref"
)

// ErrAdmittedConfig reports an admitted native configuration gatewayd cannot
// render from (unreadable, not a JSON object, or an unsupported auth mode).
var ErrAdmittedConfig = errors.New("gatewayd: unusable admitted configuration")

// ManagedPasswordEnv is the variable a managed gateway password travels in.
const ManagedPasswordEnv = contract.EnvGatewayPassword

// NodeCommands is the workspace node's command allow-list (docs/design/reference.md#s1-3).
var NodeCommands = []string{"file.fetch", "file.stat", "file.write", "file.create", "dir.list",
	"workspace.memory", "workspace.skills"}

// RenderInput is what the rendering needs beyond the admitted document.
type RenderInput struct {
	Topology        contract.Topology
	Port            int
	Bind            string
	LogLevel        string // debug, info, warn, error
	LogFile         string
	WorkspaceNodeID string
	NodeWorkspace   string
	// Workspace is the embedded Agent workspace the gateway must use
	// (agents.defaults.workspace); empty leaves the document's.
	Workspace      string
	AppServerURL   string
	AppServerToken string
	Plugins        []string
	OpenAIBase     string // offline override of the default OpenAI endpoint
	AnthropicBase  string
}

// Rendered is the outcome of Render.
type Rendered struct {
	JSON []byte
	// AuthMode is the gateway auth mode to pass as --auth.
	AuthMode string
	// ManagedPassword is true when the gateway reads OPENCLAW_GATEWAY_PASSWORD.
	ManagedPassword bool
	// Model is the primary model reference ("" when none is configured).
	Model string
	// ProviderSettings is the admitted models.providers entry of the model's
	// provider (nil for a built-in endpoint).
	ProviderSettings map[string]any
	// ProviderOverride is true when ProviderSettings was synthesized from the
	// offline endpoint override rather than admitted.
	ProviderOverride bool
}

// Render turns the admitted document into the configuration the gateway
// reads. The admitted document is never modified.
func Render(admitted []byte, in RenderInput) (Rendered, error) {
	var cfg map[string]any
	if len(strings.TrimSpace(string(admitted))) == 0 {
		cfg = map[string]any{}
	} else if err := json.Unmarshal(admitted, &cfg); err != nil || cfg == nil {
		return Rendered{}, fmt.Errorf("%w: not a JSON object", ErrAdmittedConfig)
	}
	out := Rendered{}
	gw := obj(cfg, "gateway")
	gw["mode"] = "local"
	gw["port"] = in.Port
	gw["bind"] = in.Bind
	auth := obj(gw, "auth")
	mode, _ := auth["mode"].(string)
	switch mode {
	case "", "password":
		mode = "password"
		if managedPassword(auth["password"]) {
			delete(auth, "password")
			out.ManagedPassword = true
		}
	case "trusted-proxy":
		// kept as configured; it may also request the managed password
		if managedPassword(auth["password"]) {
			delete(auth, "password")
			out.ManagedPassword = true
		}
	default:
		return Rendered{}, fmt.Errorf("%w: gateway auth mode", ErrAdmittedConfig)
	}
	auth["mode"] = mode
	out.AuthMode = mode

	// network-calling features off
	obj(cfg, "update")["checkOnStart"] = false
	obj(obj(cfg, "discovery"), "mdns")["mode"] = "off"

	// platform logging policy: admitted level, JSON console, a stable file
	lg := obj(cfg, "logging")
	if _, ok := lg["level"]; !ok && in.LogLevel != "" {
		lg["level"] = in.LogLevel
	}
	if lv, ok := lg["level"]; ok {
		lg["consoleLevel"] = lv
	}
	lg["consoleStyle"] = "json"
	delete(lg, "redactSensitive") // retired key
	if in.LogFile != "" {
		lg["file"] = in.LogFile
	}

	// embedded: the Agent workspace is the platform's, the one the
	// workspace editor writes (OCE_WORKSPACE_DIR), not the state dir's
	if in.Workspace != "" {
		obj(obj(cfg, "agents"), "defaults")["workspace"] = in.Workspace
	}

	// workspace node: the command allow-list from the start, so the surface
	// the node's one-step enrollment approves already carries the file
	// commands (the gateway withholds "dangerous" commands not allowed then,
	// and a later expansion waits for an operator's approval); the
	// file-transfer path policy once the node is pinned
	if in.Topology == contract.DedicatedCodex || in.Topology == contract.DedicatedOpenClaw {
		cmds := obj(obj(gw, "nodes"), "commands")
		cmds["allow"] = mergeStrings(cmds["allow"], NodeCommands)
	}
	if in.WorkspaceNodeID != "" {
		root := strings.TrimRight(in.NodeWorkspace, "/")
		ft := obj(obj(obj(cfg, "plugins"), "entries"), "file-transfer")
		ftc := obj(ft, "config")
		ftc["policyVersion"] = 2
		obj(ftc, "nodes")[in.WorkspaceNodeID] = map[string]any{
			"ask":             "off",
			"allowReadPaths":  []any{root + "/**"},
			"allowWritePaths": []any{root + "/**"},
		}
	}

	if in.Topology == contract.DedicatedCodex {
		codex := obj(obj(obj(cfg, "plugins"), "entries"), "codex")
		codex["enabled"] = true
		as := obj(obj(codex, "config"), "appServer")
		as["transport"] = "websocket"
		as["url"] = in.AppServerURL
		as["authToken"] = in.AppServerToken
		// Codex runs in the Harness: the plugin maps the gateway's Agent
		// workspace onto the Harness workspace, so threads start there and
		// Codex finds the AGENTS.md the workspace editor writes (project-doc
		// discovery from the thread's cwd), instead of a gateway-local path.
		if root := strings.TrimRight(in.NodeWorkspace, "/"); root != "" {
			as["remoteWorkspaceRoot"] = root
		}
	}

	// selected plugins are enabled (plugin-install)
	if len(in.Plugins) > 0 {
		entries := obj(obj(cfg, "plugins"), "entries")
		for _, id := range in.Plugins {
			obj(entries, id)["enabled"] = true
		}
	}

	out.Model = primaryModel(cfg)
	if out.Model != "" {
		if ref, err := modelref.Parse(out.Model); err == nil {
			provs := obj(obj(cfg, "models"), "providers")
			if p, ok := provs[ref.Provider].(map[string]any); ok {
				out.ProviderSettings = p
			} else if base := overrideBase(ref.Provider, in); base != "" && in.Topology == contract.Embedded {
				// offline override: the built-in provider served by the fake
				p := builtinOverride(ref, base)
				provs[ref.Provider] = p
				out.ProviderSettings = p
				out.ProviderOverride = true
			}
		}
	}
	if len(obj(obj(cfg, "models"), "providers")) == 0 {
		delete(obj(cfg, "models"), "providers")
		if len(obj(cfg, "models")) == 0 {
			delete(cfg, "models")
		}
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return Rendered{}, fmt.Errorf("%w: %v", ErrAdmittedConfig, err)
	}
	out.JSON = b
	return out, nil
}

// managedPassword reports an omitted password or the managed reference
// (${OPENCLAW_GATEWAY_PASSWORD} or an env SecretRef to it).
func managedPassword(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case string:
		return t == "" || t == "${"+ManagedPasswordEnv+"}"
	case map[string]any:
		id, _ := t["id"].(string)
		src, _ := t["source"].(string)
		return id == ManagedPasswordEnv && (src == "" || src == "env")
	}
	return false
}

func overrideBase(provider string, in RenderInput) string {
	switch provider {
	case "openai":
		return in.OpenAIBase
	case "anthropic":
		return in.AnthropicBase
	}
	return ""
}

// builtinOverride is a literal provider entry pointing a built-in provider at
// the offline override endpoint.
func builtinOverride(ref modelref.Ref, base string) map[string]any {
	api, url := "openai-responses", strings.TrimRight(base, "/")+"/v1"
	if ref.Provider == "anthropic" {
		api, url = "anthropic-messages", strings.TrimRight(base, "/")
	}
	return map[string]any{"baseUrl": url, "api": api, "models": []any{map[string]any{
		"id": ref.Model, "name": ref.Model, "input": []any{"text"}, "contextWindow": 128000, "maxTokens": 4096}}}
}

// primaryModel reads agents.defaults.model (a string or {primary}).
func primaryModel(cfg map[string]any) string {
	a, _ := cfg["agents"].(map[string]any)
	d, _ := a["defaults"].(map[string]any)
	switch m := d["model"].(type) {
	case string:
		return m
	case map[string]any:
		p, _ := m["primary"].(string)
		return p
	}
	return ""
}

// obj returns m[k] as an object, creating it (or replacing a non-object).
func obj(m map[string]any, k string) map[string]any {
	if v, ok := m[k].(map[string]any); ok {
		return v
	}
	v := map[string]any{}
	m[k] = v
	return v
}

func mergeStrings(existing any, add []string) []any {
	set := map[string]bool{}
	if l, ok := existing.([]any); ok {
		for _, v := range l {
			if s, ok := v.(string); ok {
				set[s] = true
			}
		}
	}
	for _, s := range add {
		set[s] = true
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]any, len(keys))
	for i, k := range keys {
		out[i] = k
	}
	return out
}

// writeRendered writes the rendered config (0600) into dir and reports
// whether the directory is writable for the gateway (OPENCLAW_CONFIG_READONLY
// otherwise).
func writeRendered(dir string, b []byte) (path string, writable bool, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", false, err
	}
	path = filepath.Join(dir, RenderedConfigName)
	if err := atomicfile.Write(path, b, 0o600); err != nil {
		return "", false, err
	}
	return path, dirWritable(dir), nil
}

func dirWritable(dir string) bool {
	f, err := os.CreateTemp(dir, ".w-*")
	if err != nil {
		return false
	}
	f.Close()
	os.Remove(f.Name())
	return true
}
