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
	// ProviderPlugins are the model-provider plugins the runtime loads at
	// every start (plugin id → provider ids; startupProviderPlugins): those
	// serving no provider the configuration names are switched off.
	ProviderPlugins map[string][]string
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
// reads. The admitted document is never modified. Each concern oce owns in
// the document is one function below; they run in this order.
func Render(admitted []byte, in RenderInput) (Rendered, error) {
	cfg, err := parseAdmitted(admitted)
	if err != nil {
		return Rendered{}, err
	}
	out := Rendered{}
	renderListener(cfg, in)
	if out.AuthMode, out.ManagedPassword, err = renderAuth(cfg); err != nil {
		return Rendered{}, err
	}
	disableNetworkFeatures(cfg)
	renderLean(cfg, in)
	renderLogging(cfg, in)
	renderWorkspace(cfg, in)
	renderNodeCommands(cfg, in)
	renderNodePathPolicy(cfg, in)
	renderCodex(cfg, in)
	enablePlugins(cfg, in)
	out.Model, out.ProviderSettings, out.ProviderOverride = renderProvider(cfg, in)
	pruneEmptyModels(cfg)
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return Rendered{}, fmt.Errorf("%w: %v", ErrAdmittedConfig, err)
	}
	out.JSON = b
	return out, nil
}

// object is a JSON object of the document, edited in place. Nested objects
// stay plain map[string]any so type assertions on them keep working.
type object map[string]any

// obj returns the object at path below o, creating each missing one (and
// replacing a value that is not an object).
func (o object) obj(path ...string) object {
	m := map[string]any(o)
	for _, k := range path {
		v, ok := m[k].(map[string]any)
		if !ok {
			v = map[string]any{}
			m[k] = v
		}
		m = v
	}
	return m
}

// str returns o[k] when it is a string.
func (o object) str(k string) string {
	s, _ := o[k].(string)
	return s
}

// parseAdmitted reads the admitted document; blank is an empty object.
func parseAdmitted(admitted []byte) (object, error) {
	if len(strings.TrimSpace(string(admitted))) == 0 {
		return object{}, nil
	}
	var cfg map[string]any
	if err := json.Unmarshal(admitted, &cfg); err != nil || cfg == nil {
		return nil, fmt.Errorf("%w: not a JSON object", ErrAdmittedConfig)
	}
	return cfg, nil
}

// renderListener makes the gateway a local one on the platform's port and bind.
func renderListener(cfg object, in RenderInput) {
	gw := cfg.obj("gateway")
	gw["mode"], gw["port"], gw["bind"] = "local", in.Port, in.Bind
}

// renderAuth keeps the admitted auth mode (password by default;
// trusted-proxy as configured) and takes over a managed password, which the
// gateway then reads from ManagedPasswordEnv.
func renderAuth(cfg object) (mode string, managed bool, err error) {
	auth := cfg.obj("gateway", "auth")
	switch mode = auth.str("mode"); mode {
	case "":
		mode = "password"
	case "password", "trusted-proxy":
	default:
		return "", false, fmt.Errorf("%w: gateway auth mode", ErrAdmittedConfig)
	}
	if managed = managedPassword(auth["password"]); managed {
		delete(auth, "password")
	}
	auth["mode"] = mode
	return mode, managed, nil
}

// disableNetworkFeatures turns off the features that call out on their own.
func disableNetworkFeatures(cfg object) {
	cfg.obj("update")["checkOnStart"] = false
	cfg.obj("discovery", "mdns")["mode"] = "off"
}

// renderLogging applies the platform logging policy: the admitted level (the
// platform's when none), JSON console at that level, a stable file.
func renderLogging(cfg object, in RenderInput) {
	lg := cfg.obj("logging")
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
}

// renderWorkspace points an embedded gateway's Agent workspace at the
// platform's, the one the workspace editor writes (OCE_WORKSPACE_DIR), not
// the state dir's.
func renderWorkspace(cfg object, in RenderInput) {
	if in.Workspace != "" {
		cfg.obj("agents", "defaults")["workspace"] = in.Workspace
	}
}

// renderNodeCommands allows the workspace node's commands from the start, so
// the surface the node's one-step enrollment approves already carries the
// file commands (the gateway withholds "dangerous" commands not allowed
// then, and a later expansion waits for an operator's approval).
func renderNodeCommands(cfg object, in RenderInput) {
	if in.Topology != contract.DedicatedCodex && in.Topology != contract.DedicatedOpenClaw {
		return
	}
	cmds := cfg.obj("gateway", "nodes", "commands")
	cmds["allow"] = mergeStrings(cmds["allow"], NodeCommands)
}

// renderNodePathPolicy gives the pinned workspace node the file-transfer
// path policy: read and write under its workspace, without asking.
func renderNodePathPolicy(cfg object, in RenderInput) {
	if in.WorkspaceNodeID == "" {
		return
	}
	paths := nodeRoot(in) + "/**"
	ftc := cfg.obj("plugins", "entries", "file-transfer", "config")
	ftc["policyVersion"] = 2
	ftc.obj("nodes")[in.WorkspaceNodeID] = map[string]any{
		"ask":             "off",
		"allowReadPaths":  []any{paths},
		"allowWritePaths": []any{paths},
	}
}

// renderCodex enables the Codex plugin of a dedicated Codex gateway on the
// Harness's app server.
func renderCodex(cfg object, in RenderInput) {
	if in.Topology != contract.DedicatedCodex {
		return
	}
	codex := cfg.obj("plugins", "entries", "codex")
	codex["enabled"] = true
	as := codex.obj("config", "appServer")
	as["transport"], as["url"], as["authToken"] = "websocket", in.AppServerURL, in.AppServerToken
	// Codex runs in the Harness: the plugin maps the gateway's Agent
	// workspace onto the Harness workspace, so threads start there and
	// Codex finds the AGENTS.md the workspace editor writes (project-doc
	// discovery from the thread's cwd), instead of a gateway-local path.
	if root := nodeRoot(in); root != "" {
		as["remoteWorkspaceRoot"] = root
	}
}

// nodeRoot is the workspace node's workspace without a trailing slash.
func nodeRoot(in RenderInput) string {
	return strings.TrimRight(in.NodeWorkspace, "/")
}

// enablePlugins enables the selected plugins (plugin-install).
func enablePlugins(cfg object, in RenderInput) {
	if len(in.Plugins) == 0 {
		return
	}
	entries := cfg.obj("plugins", "entries")
	for _, id := range in.Plugins {
		entries.obj(id)["enabled"] = true
	}
}

// renderProvider reports the primary model and its admitted provider entry;
// an embedded gateway with the offline override and no admitted entry gets a
// literal entry pointing the built-in provider at the override.
func renderProvider(cfg object, in RenderInput) (model string, settings map[string]any, override bool) {
	model = primaryModel(cfg)
	if model == "" {
		return "", nil, false
	}
	ref, err := modelref.Parse(model)
	if err != nil {
		return model, nil, false
	}
	provs := cfg.obj("models", "providers")
	if p, ok := provs[ref.Provider].(map[string]any); ok {
		return model, p, false
	}
	base := overrideBase(ref.Provider, in)
	if base == "" || in.Topology != contract.Embedded {
		return model, nil, false
	}
	p := builtinOverride(ref, base)
	provs[ref.Provider] = p
	return model, p, true
}

// pruneEmptyModels drops an empty models.providers, and models when nothing
// else is left in it.
func pruneEmptyModels(cfg object) {
	models := cfg.obj("models")
	if len(models.obj("providers")) > 0 {
		return
	}
	delete(models, "providers")
	if len(models) == 0 {
		delete(cfg, "models")
	}
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
func primaryModel(cfg object) string {
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
