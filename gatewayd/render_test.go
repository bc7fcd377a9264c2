package gatewayd

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/contract"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/render")

// renderGoldenCases cover every concern Render edits, over admitted
// documents that hold the keys it edits, omit them, or hold them with the
// wrong JSON type, so a change of Render's output is seen byte for byte.
func renderGoldenCases() []struct {
	name     string
	admitted string
	in       RenderInput
} {
	embedded := RenderInput{Topology: contract.Embedded, Port: 18789, Bind: "loopback", LogLevel: "info",
		LogFile: "/s/logs/openclaw.log", Workspace: "/home/node/workspace"}
	codex := RenderInput{Topology: contract.DedicatedCodex, Port: 18789, Bind: "lan", LogLevel: "debug",
		LogFile: "/s/logs/openclaw.log", WorkspaceNodeID: "dev1", NodeWorkspace: "/home/node/workspace/",
		AppServerURL: "ws://h:18790", AppServerToken: "tok", Plugins: []string{"github", "codex", "file-transfer"}}
	openclaw := RenderInput{Topology: contract.DedicatedOpenClaw, Port: 1, Bind: "lan", LogLevel: "warn",
		WorkspaceNodeID: "n", NodeWorkspace: "/w"}
	offline := embedded
	offline.OpenAIBase, offline.AnthropicBase = "http://127.0.0.1:9/", "http://127.0.0.1:8"
	codexOffline := codex
	codexOffline.OpenAIBase = "http://127.0.0.1:9"
	codexUnpinned := codex
	codexUnpinned.WorkspaceNodeID, codexUnpinned.NodeWorkspace, codexUnpinned.Plugins = "", "", nil
	nodeNoRoot := openclaw
	nodeNoRoot.NodeWorkspace = "///"
	noLevel := embedded
	noLevel.LogLevel, noLevel.LogFile, noLevel.Workspace = "", "", ""
	return []struct {
		name     string
		admitted string
		in       RenderInput
	}{
		{"empty embedded", ``, embedded},
		{"blank embedded", " \n\t", embedded},
		{"empty object codex", `{}`, codex},
		{"empty dedicated openclaw", ``, openclaw},
		{"zero input", `{}`, RenderInput{}},
		{"auth omitted password", `{"gateway":{"auth":{"mode":"password"}}}`, embedded},
		{"auth managed template", `{"gateway":{"auth":{"password":"${OPENCLAW_GATEWAY_PASSWORD}"}}}`, embedded},
		{"auth managed ref", `{"gateway":{"auth":{"password":{"source":"env","provider":"default","id":"OPENCLAW_GATEWAY_PASSWORD"}}}}`, embedded},
		{"auth managed ref no source", `{"gateway":{"auth":{"password":{"id":"OPENCLAW_GATEWAY_PASSWORD"}}}}`, embedded},
		{"auth other ref kept", `{"gateway":{"auth":{"password":{"source":"file","provider":"f","id":"/x"}}}}`, embedded},
		{"auth literal kept", `{"gateway":{"auth":{"password":"s3cret","extra":1},"port":5,"mode":"remote","x":true}}`, embedded},
		{"auth password not string", `{"gateway":{"auth":{"password":7}}}`, embedded},
		{"auth trusted proxy", `{"gateway":{"auth":{"mode":"trusted-proxy","trustedProxy":{"userHeader":"x-user"}}}}`, codex},
		{"auth trusted proxy literal", `{"gateway":{"auth":{"mode":"trusted-proxy","password":"p"}}}`, codex},
		{"auth token refused", `{"gateway":{"auth":{"mode":"token"}}}`, embedded},
		{"auth mode not string", `{"gateway":{"auth":{"mode":5}}}`, embedded},
		{"wrong types everywhere", `{"gateway":1,"logging":[],"plugins":{"entries":null},"update":"x","discovery":{"mdns":3},` +
			`"agents":7,"models":5}`, codex},
		{"wrong types nested", `{"gateway":{"auth":[],"nodes":{"commands":"all"}},"plugins":{"entries":{"codex":1,` +
			`"file-transfer":{"config":{"nodes":[]}}}},"agents":{"defaults":3},"discovery":4}`, codex},
		{"topologies admitted", `{"agents":{"defaults":{"model":{"primary":"openai/gpt-x"}}},"logging":{"level":"debug","redactSensitive":"off"}}`, offline},
		{"topologies codex", `{"agents":{"defaults":{"model":{"primary":"openai/gpt-x"}}},"logging":{"level":"debug","redactSensitive":"off"}}`, codexOffline},
		{"codex unpinned", `{"agents":{"defaults":{"model":"openai/gpt-x"}}}`, codexUnpinned},
		{"node without root", `{"gateway":{"nodes":{"commands":{"allow":["zz.custom","file.fetch",3,"file.fetch"],"deny":["x"]}}}}`, nodeNoRoot},
		{"existing plugin config", `{"plugins":{"entries":{"codex":{"enabled":false,"config":{"appServer":{"url":"old","x":1},"y":2}},` +
			`"file-transfer":{"config":{"policyVersion":1,"nodes":{"other":{"ask":"on"},"dev1":{"ask":"on","z":1}}}},"github":{"config":{}}}}}`, codex},
		{"logging level kept", `{"logging":{"level":"error","consoleLevel":"debug","consoleStyle":"pretty","file":"/x"}}`, embedded},
		{"logging level not string", `{"logging":{"level":3}}`, embedded},
		{"logging no level", `{"logging":{"redactSensitive":"tools"}}`, noLevel},
		{"workspace kept", `{"agents":{"defaults":{"workspace":"/mine","model":"anthropic/claude-x"},"list":[{"id":"a"}]}}`, noLevel},
		{"workspace replaced", `{"agents":{"defaults":{"workspace":"/mine"}}}`, embedded},
		{"admitted provider", `{"agents":{"defaults":{"model":"openai/gpt-x"}},"models":{"mode":"merge","providers":{"openai":` +
			`{"baseUrl":"http://h/v1","api":"openai-responses","headers":{"X-A":"b"},"request":{"timeout":30}}}}}`, offline},
		{"anthropic override", `{"agents":{"defaults":{"model":{"primary":"anthropic/claude-x","fallbacks":["openai/y"]}}}}`, offline},
		{"openai override", `{"agents":{"defaults":{"model":"openai/gpt-x"}}}`, offline},
		{"unknown provider", `{"agents":{"defaults":{"model":"acme/m1"}},"models":{"providers":{"other":{"baseUrl":"u"}}}}`, offline},
		{"unparsable model", `{"agents":{"defaults":{"model":"no-slash"}},"models":{"providers":{}}}`, offline},
		{"model not string", `{"agents":{"defaults":{"model":{"primary":5}}},"models":{"providers":{},"x":1}}`, offline},
		{"empty models", `{"models":{}}`, embedded},
		{"models providers wrong type", `{"models":{"providers":[1],"mode":"replace"}}`, embedded},
		{"provider not object", `{"agents":{"defaults":{"model":"openai/gpt-x"}},"models":{"providers":{"openai":"x"}}}`, offline},
		{"numbers and escapes", `{"meta":{"f":1.5,"e":1e21,"small":1e-7,"big":12345678901234567890,"neg":-0,"int":42,` +
			`"html":"<a href=\"x\">&</a>","ls":"\u2028\u2029","uni":"héllo ☃","esc":"\t\n\\"},"list":[1,2.50,true,null,"s"]}`, embedded},
		{"not an object array", `[1,2]`, embedded},
		{"not an object null", `null`, embedded},
		{"not an object string", `"x"`, embedded},
		{"not JSON", `{"a":`, embedded},
	}
}

// renderGolden is the text a golden file holds for one Render outcome:
// the Rendered fields, a separator, then the rendered JSON byte for byte.
func renderGolden(t *testing.T, r Rendered, err error) []byte {
	if err != nil {
		return []byte("error: " + err.Error() + "\n")
	}
	settings, merr := json.Marshal(r.ProviderSettings)
	require.NoError(t, merr)
	head := fmt.Sprintf("authMode: %s\nmanagedPassword: %t\nmodel: %s\nproviderOverride: %t\nproviderSettings: %s\n---\n",
		r.AuthMode, r.ManagedPassword, r.Model, r.ProviderOverride, settings)
	return append([]byte(head), r.JSON...)
}

// TestRenderGolden pins Render's whole outcome, the rendered JSON byte for
// byte, for each case in testdata/render (go test -run TestRenderGolden -update
// rewrites them).
func TestRenderGolden(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range renderGoldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join("testdata", "render", strings.ReplaceAll(tc.name, " ", "-")+".golden")
			require.False(t, seen[file], "duplicate case name")
			seen[file] = true
			r, err := Render([]byte(tc.admitted), tc.in)
			got := renderGolden(t, r, err)
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
				require.NoError(t, os.WriteFile(file, got, 0o644))
			}
			want, err := os.ReadFile(file)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
		})
	}
}
