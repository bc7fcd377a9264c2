package gatewayd

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/runtimes"
)

// craftAgentDB writes an agent database with user_version v where the
// pinned runtime keeps it.
func craftAgentDB(t testing.TB, stateDir, agent string, v int) string {
	dir := filepath.Join(stateDir, "agents", agent, "agent")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	path := filepath.Join(dir, "openclaw-agent.sqlite")
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
	require.NoError(t, err)
	_, err = db.Exec(fmt.Sprintf("PRAGMA user_version = %d", v))
	require.NoError(t, err)
	return path
}

func TestMigrationDecisionTable(t *testing.T) {
	cases := []struct {
		name     string
		versions []int
		garbage  bool
		need     bool
		err      bool
	}{
		{"no databases", nil, false, false, false},
		{"zero", []int{0}, false, false, false},
		{"one", []int{1}, false, true, false},
		{"twenty-three", []int{23}, false, true, false},
		{"current", []int{24}, false, false, false},
		{"newer", []int{25}, false, false, false},
		{"current and old", []int{24, 7}, false, true, false},
		{"zero and current", []int{0, 24}, false, false, false},
		{"not a database", nil, true, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			var paths []string
			for i, v := range tc.versions {
				paths = append(paths, craftAgentDB(t, state, fmt.Sprintf("agent%d", i), v))
			}
			if tc.garbage {
				dir := filepath.Join(state, "agents", "x", "agent")
				require.NoError(t, os.MkdirAll(dir, 0o700))
				require.NoError(t, os.WriteFile(filepath.Join(dir, "openclaw-agent.sqlite"), []byte("not sqlite at all, no header here........"), 0o600))
			}
			before := map[string][]byte{}
			for _, p := range paths {
				before[p], _ = os.ReadFile(p)
			}
			need, found, err := NeedsMigration(context.Background(), state)
			if tc.err {
				require.ErrorIs(t, err, ErrDatabaseUnreadable)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.need, need)
			require.Len(t, found, len(tc.versions))
			for _, p := range paths {
				after, _ := os.ReadFile(p)
				require.Equal(t, before[p], after, "read-only check modified the database")
				_, err := os.Stat(p + "-wal")
				require.True(t, os.IsNotExist(err), "read-only check created a WAL")
			}
		})
	}
}

func TestRenderGatewayAuth(t *testing.T) {
	in := RenderInput{Topology: contract.Embedded, Port: 18789, Bind: "lan", LogLevel: "info", LogFile: "/s/logs/openclaw.log"}
	cases := []struct {
		name    string
		auth    map[string]any
		managed bool
		mode    string
		keep    any
		err     bool
	}{
		{"omitted", nil, true, "password", nil, false},
		{"omitted password", map[string]any{"mode": "password"}, true, "password", nil, false},
		{"managed template", map[string]any{"password": "${OPENCLAW_GATEWAY_PASSWORD}"}, true, "password", nil, false},
		{"managed ref", map[string]any{"password": map[string]any{"source": "env", "provider": "default", "id": "OPENCLAW_GATEWAY_PASSWORD"}}, true, "password", nil, false},
		{"other ref kept", map[string]any{"password": map[string]any{"source": "file", "provider": "f", "id": "/x"}}, false, "password",
			map[string]any{"source": "file", "provider": "f", "id": "/x"}, false},
		{"trusted proxy kept", map[string]any{"mode": "trusted-proxy", "trustedProxy": map[string]any{"userHeader": "x-user"}}, true, "trusted-proxy", nil, false},
		{"token refused", map[string]any{"mode": "token"}, false, "", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := map[string]any{}
			if tc.auth != nil {
				doc["gateway"] = map[string]any{"auth": tc.auth}
			}
			b, _ := json.Marshal(doc)
			r, err := Render(b, in)
			if tc.err {
				require.ErrorIs(t, err, ErrAdmittedConfig)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.managed, r.ManagedPassword)
			require.Equal(t, tc.mode, r.AuthMode)
			var out map[string]any
			require.NoError(t, json.Unmarshal(r.JSON, &out))
			auth := out["gateway"].(map[string]any)["auth"].(map[string]any)
			require.Equal(t, tc.keep, auth["password"])
			if tc.mode == "trusted-proxy" {
				require.NotNil(t, auth["trustedProxy"])
			}
			require.Equal(t, false, out["update"].(map[string]any)["checkOnStart"])
			require.Equal(t, "off", out["discovery"].(map[string]any)["mdns"].(map[string]any)["mode"])
			require.Equal(t, "json", out["logging"].(map[string]any)["consoleStyle"])
		})
	}
}

func TestRenderTopologies(t *testing.T) {
	admitted := []byte(`{"agents":{"defaults":{"model":{"primary":"openai/gpt-x"}}},"logging":{"level":"debug","redactSensitive":"off"}}`)
	// embedded with the offline override: the built-in provider points at it
	r, err := Render(admitted, RenderInput{Topology: contract.Embedded, Port: 1, Bind: "loopback", OpenAIBase: "http://127.0.0.1:9"})
	require.NoError(t, err)
	require.Equal(t, "openai/gpt-x", r.Model)
	require.True(t, r.ProviderOverride)
	require.Equal(t, "http://127.0.0.1:9/v1", r.ProviderSettings["baseUrl"])
	var out map[string]any
	require.NoError(t, json.Unmarshal(r.JSON, &out))
	lg := out["logging"].(map[string]any)
	require.Equal(t, "debug", lg["consoleLevel"])
	require.NotContains(t, lg, "redactSensitive")

	// dedicated Codex: websocket app-server transport, pinned node policy
	r, err = Render(admitted, RenderInput{Topology: contract.DedicatedCodex, Port: 1, Bind: "lan", AppServerURL: "ws://h:18790",
		AppServerToken: "tok", WorkspaceNodeID: "dev1", NodeWorkspace: "/home/node/workspace/", Plugins: []string{"github"}})
	require.NoError(t, err)
	require.False(t, r.ProviderOverride)
	require.Nil(t, r.ProviderSettings, "a dedicated gateway gets no override provider")
	out = nil
	require.NoError(t, json.Unmarshal(r.JSON, &out))
	entries := out["plugins"].(map[string]any)["entries"].(map[string]any)
	as := entries["codex"].(map[string]any)["config"].(map[string]any)["appServer"].(map[string]any)
	require.Equal(t, map[string]any{"transport": "websocket", "url": "ws://h:18790", "authToken": "tok",
		"remoteWorkspaceRoot": "/home/node/workspace"}, as, "Codex threads start in the Harness workspace")
	require.Equal(t, true, entries["github"].(map[string]any)["enabled"])
	ft := entries["file-transfer"].(map[string]any)["config"].(map[string]any)
	require.Equal(t, float64(2), ft["policyVersion"])
	node := ft["nodes"].(map[string]any)["dev1"].(map[string]any)
	require.Equal(t, []any{"/home/node/workspace/**"}, node["allowReadPaths"])
	allow := out["gateway"].(map[string]any)["nodes"].(map[string]any)["commands"].(map[string]any)["allow"]
	require.ElementsMatch(t, []any{"dir.list", "file.create", "file.fetch", "file.stat", "file.write", "workspace.memory", "workspace.skills"}, allow)

	// before the node is pinned: the allow-list already (the enrollment's
	// first surface carries the file commands), no per-node path policy
	r, err = Render(admitted, RenderInput{Topology: contract.DedicatedCodex, Port: 1, Bind: "lan", AppServerURL: "ws://h:18790",
		AppServerToken: "tok", NodeWorkspace: "/home/node/workspace"})
	require.NoError(t, err)
	out = nil
	require.NoError(t, json.Unmarshal(r.JSON, &out))
	allow = out["gateway"].(map[string]any)["nodes"].(map[string]any)["commands"].(map[string]any)["allow"]
	require.ElementsMatch(t, []any{"dir.list", "file.create", "file.fetch", "file.stat", "file.write", "workspace.memory", "workspace.skills"}, allow)
	entries = out["plugins"].(map[string]any)["entries"].(map[string]any)
	require.NotContains(t, entries, "file-transfer", "no node, no path policy")

	// embedded: no workspace node, no node commands
	r, err = Render(admitted, RenderInput{Topology: contract.Embedded, Port: 1, Bind: "loopback"})
	require.NoError(t, err)
	out = nil
	require.NoError(t, json.Unmarshal(r.JSON, &out))
	require.NotContains(t, out["gateway"].(map[string]any), "nodes")

	_, err = Render([]byte(`[1,2]`), RenderInput{})
	require.ErrorIs(t, err, ErrAdmittedConfig)
}

func TestPolicyOverride(t *testing.T) {
	p := DefaultPolicy()
	require.Equal(t, 330_000_000_000, int(p.StopBudget))
	require.NoError(t, p.Override("readyWithin=2s,maxRespawns=2"))
	require.Equal(t, 2, p.MaxRespawns)
	require.Error(t, p.Override("bogus=1s"))
	require.Error(t, p.Override("readyWithin=-1s"))
}

func FuzzRender(f *testing.F) {
	f.Add([]byte(`{"gateway":{"auth":{"mode":"password","password":"x"}}}`))
	f.Add([]byte(`{"agents":{"defaults":{"model":"openai/x"}},"models":{"providers":{"openai":{"baseUrl":"http://h"}}}}`))
	f.Add([]byte(`{"gateway":1,"logging":[],"plugins":{"entries":null}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Render(b, RenderInput{Topology: contract.DedicatedCodex, Port: 1, Bind: "lan", WorkspaceNodeID: "d", AppServerURL: "ws://x"})
		if err != nil {
			require.ErrorIs(t, err, ErrAdmittedConfig)
			return
		}
		var out map[string]any
		require.NoError(t, json.Unmarshal(r.JSON, &out))
		gw := out["gateway"].(map[string]any)
		require.Equal(t, "local", gw["mode"])
		require.Contains(t, []string{"password", "trusted-proxy"}, r.AuthMode)
	})
}

func FuzzPolicyOverride(f *testing.F) {
	f.Add("readyWithin=2s,maxRespawns=2")
	f.Add("stopBudget=5s,peerPoll=100ms")
	f.Add("=,")
	f.Fuzz(func(t *testing.T, spec string) {
		p := DefaultPolicy()
		if err := p.Override(spec); err != nil {
			require.ErrorIs(t, err, ErrBadEnv)
			return
		}
		require.Positive(t, p.ReadyWithin)
		require.Positive(t, p.StopBudget)
		require.GreaterOrEqual(t, p.MaxRespawns, 1)
		require.GreaterOrEqual(t, p.AttemptsPerRespawn, 1)
	})
}

func TestLoadConfigUnsetsSecrets(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model-api-key"), []byte("sk-file-key-1234\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "loose"), []byte("x"), 0o644))
	t.Setenv("OCE_TOPOLOGY", "embedded")
	t.Setenv("OCE_SECRETS_DIR", dir)
	t.Setenv("OPENCLAW_GATEWAY_PASSWORD", "env-password-1")
	t.Setenv("OPENAI_API_KEY", "sk-env-key-should-lose")
	c, err := LoadConfig()
	require.NoError(t, err)
	require.Equal(t, "env-password-1", c.Password)
	require.Equal(t, "sk-file-key-1234", c.ModelKey, "the secret file wins over the variable")
	for _, k := range []string{"OPENCLAW_GATEWAY_PASSWORD", "OPENAI_API_KEY"} {
		_, set := os.LookupEnv(k)
		require.False(t, set, "%s still set", k)
	}
	require.Equal(t, DefaultPort, c.Port)
	require.Equal(t, DefaultPolicy(), c.Policy)

	t.Setenv("OCE_TOPOLOGY", "sideways")
	t.Setenv("OPENCLAW_GATEWAY_PASSWORD", "pw-again-1")
	_, err = LoadConfig()
	require.ErrorIs(t, err, ErrBadTopology)

	_, err = readSecretFile(filepath.Join(dir, "loose"))
	require.ErrorIs(t, err, ErrInsecureSecret)
}

// The runtime location an image sets (OCE_OPENCLAW_MJS, OCE_NODE) wins over
// the development cache; a named file that is missing is an error naming it.
func TestResolveOpenClawFromImageEnv(t *testing.T) {
	dir := t.TempDir()
	mjs, node := filepath.Join(dir, "openclaw.mjs"), filepath.Join(dir, "node")
	env := map[string]string{"OCE_OPENCLAW_MJS": mjs, "OCE_NODE": node}
	get := func(k string) string { return env[k] }
	_, err := resolveOpenClaw(get)
	require.ErrorIs(t, err, runtimes.ErrMissingInImage)
	require.Contains(t, err.Error(), "OCE_OPENCLAW_MJS")
	require.NoError(t, os.WriteFile(mjs, nil, 0o644))
	_, err = resolveOpenClaw(get)
	require.ErrorIs(t, err, runtimes.ErrMissingInImage)
	require.Contains(t, err.Error(), "OCE_NODE")
	require.NoError(t, os.WriteFile(node, nil, 0o755))
	cmd, err := resolveOpenClaw(get)
	require.NoError(t, err)
	require.Equal(t, []string{node, mjs}, cmd)
}
