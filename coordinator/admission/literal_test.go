package admission

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/codes"
)

// Credential-shaped values for the cases below (made up; never real).
const (
	keyOpenAI    = "sk-proj-Zq8v1LxT4nR9bW2mK7cY3pD6fH0jS5aE"
	keyAnthropic = "sk-ant-api03-Hk2Jv9Qw4Lm7Np1Rt6Yx3Zb8Cd5Fg0"
	keyGitHub    = "ghp_9fK2mQ7xL4vN1bT8rW3yZ6cH0jD5sA2eP4uG"
	keySlack     = "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp"
	keyAWS       = "AKIAIOSFODNN7EXAMPLQ"
	jwtLike      = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLWhlcmU"
	randomish    = "q7Lm2Xv9Rt4Kw8Zp3Nb6Yc1Hd5Fg0Js"
)

// TestLiteralCredentialPlacements: every placement issue 25 names, and the
// value shapes anywhere, are refused at save with their JSON path and
// reason, and the refusal never echoes the value.
func TestLiteralCredentialPlacements(t *testing.T) {
	for _, tc := range []struct{ name, doc, path, reason string }{
		{"custom auth header", `{"models":{"providers":{"custom":{"baseUrl":"https://m.example/v1","headers":{"X-Custom-Auth":"opaque-value-1"}}}}}`,
			`models.providers.custom.headers.X-Custom-Auth`, ReasonMapEntry},
		{"baseUrl userinfo", `{"models":{"providers":{"custom":{"baseUrl":"https://svc:hunter2@m.example/v1"}}}}`,
			"models.providers.custom.baseUrl", ReasonUserinfo},
		{"cron webhook token", `{"cron":{"webhookToken":"plain-words-token"}}`, "cron.webhookToken", ReasonSensitive},
		{"gmail push token", `{"hooks":{"gmail":{"pushToken":"abc123"}}}`, "hooks.gmail.pushToken", ReasonSensitive},
		{"line access token", `{"channels":{"line":{"channelAccessToken":"short"}}}`, "channels.line.channelAccessToken", ReasonSensitive},
		{"line secret", `{"channels":{"line":{"channelSecret":"s3cr3t"}}}`, "channels.line.channelSecret", ReasonSensitive},
		{"line account secret", `{"channels":{"line":{"accounts":{"a":{"channelSecret":"s3cr3t"}}}}}`, "channels.line.accounts.a.channelSecret", ReasonSensitive},
		{"env var api key", `{"env":{"vars":{"OPENAI_API_KEY":"not-shaped-at-all"}}}`, "env.vars.OPENAI_API_KEY", ReasonMapEntry},
		{"env var high entropy", `{"env":{"vars":{"SOMETHING":"` + randomish + `"}}}`, "env.vars.SOMETHING", ReasonMapEntry},
		{"openai key under an innocent name", `{"agents":{"defaults":{"model":{"primary":"openai/x"}}},"messages":{"ackReaction":"` + keyOpenAI + `"}}`, "messages.ackReaction", ReasonShape},
		{"anthropic key in a header", `{"models":{"providers":{"a":{"headers":{"x-note":"Bearer ` + keyAnthropic + `"}}}}}`, `models.providers.a.headers.x-note`, ReasonShape},
		{"github token", `{"tools":{"web":{"fetch":{"headers":{"X-Plain":"` + keyGitHub + `"}}}}}`, `tools.web.fetch.headers.X-Plain`, ReasonShape},
		{"slack token", `{"channels":{"slack":{"botToken":"` + keySlack + `"}}}`, "channels.slack.botToken", ReasonShape},
		{"aws key id", `{"env":{"vars":{"AWS_ID":"` + keyAWS + `"}}}`, "env.vars.AWS_ID", ReasonShape},
		{"jwt", `{"gateway":{"remote":{"url":"wss://g.example","token":"` + jwtLike + `"}}}`, "gateway.remote.token", ReasonShape},
		{"private key", `{"agents":{"defaults":{"sandbox":{"ssh":{"identityData":"-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----"}}}}}`,
			"agents.defaults.sandbox.ssh.identityData", ReasonShape},
		{"mcp env", `{"mcp":{"servers":{"s":{"command":"x","env":{"GITHUB_TOKEN":"t0ken"}}}}}`, "mcp.servers.s.env.GITHUB_TOKEN", ReasonMapEntry},
		{"key in a URL query", `{"models":{"providers":{"g":{"baseUrl":"https://g.example/v1?key=AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW"}}}}`, "models.providers.g.baseUrl", ReasonShape},
		{"array of secret inputs", `{"models":{"providers":{"openai":{"apiKey":"plain"}}}}`, "models.providers.openai.apiKey", ReasonSensitive},
		{"old key names still refused", `{"plugins":{"entries":{"x":{"config":{"password":"pw"}}}}}`, "plugins.entries.x.config.password", ReasonKeyName},
		{"default value in a reference", `{"models":{"providers":{"openai":{"apiKey":"${OPENAI_API_KEY:-fallback}"}}}}`, "models.providers.openai.apiKey", ReasonSensitive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, why := literalCredential(tree(t, tc.doc))
			require.Equal(t, tc.path, p)
			require.Equal(t, tc.reason, why)
			err := ValidateConfiguration([]byte(tc.doc))
			var ae *Error
			require.True(t, errors.As(err, &ae), "%v", err)
			require.Equal(t, codes.InvalidRequest, ae.Code)
			require.Equal(t, RuleLiteralCredential, ae.Rule())
			require.Equal(t, tc.path, ae.Details["path"])
			require.Equal(t, tc.reason, ae.Details["reason"])
			raw, _ := json.Marshal(ae)
			for _, secret := range []string{"hunter2", keyOpenAI, keyAnthropic, keyGitHub, keySlack, keyAWS, jwtLike, randomish, "s3cr3t", "t0ken"} {
				require.NotContains(t, ae.Message+string(raw), secret)
			}
		})
	}
}

// TestReferencesAccepted: references, public material and plain settings
// in header and env maps pass, so real configurations keep working.
func TestReferencesAccepted(t *testing.T) {
	for _, doc := range []string{
		`{"models":{"providers":{"openai":{"apiKey":"${OPENAI_API_KEY}"}}}}`,
		`{"models":{"providers":{"openai":{"apiKey":{"source":"env","provider":"default","id":"OPENAI_API_KEY"}}}}}`,
		`{"models":{"providers":{"c":{"baseUrl":"https://m.example/v1","headers":{"Authorization":"Bearer ${TOKEN}","x-org":"o","OpenAI-Beta":"assistants=v2"}}}}}`,
		`{"channels":{"telegram":{"webhookSecret":{"source":"file","provider":"vault","id":"/telegram/secret"}}}}`,
		`{"channels":{"line":{"secretFile":"/run/secrets/line"}}}`,
		`{"env":{"vars":{"CODEX_HOME":"/x","LOG_LEVEL":"debug","REGION":"eu-west-1","BUILD":"2026.9.6-rc1"}}}`,
		`{"proxy":{"enabled":true,"proxyUrl":"http://proxy.internal:3128"}}`,
		`{"agents":{"defaults":{"sandbox":{"ssh":{"knownHostsData":"host.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"}}}}}`,
		`{"models":{"providers":{"openai":{"apiKey":"${OPENAI_API_KEY}","agentRuntime":{"id":"openclaw"},"headers":{"x-org":"o"}}}}}`,
	} {
		p, why := literalCredential(tree(t, doc))
		require.Empty(t, p, "%s refused as %s", doc, why)
	}
	for _, ex := range Examples() {
		p, why := literalCredential(tree(t, ex.Document))
		require.Empty(t, p, "example %s refused as %s", ex.Name, why)
	}
	// The demo and e2e configurations.
	files, err := filepath.Glob("../../scripts/demo/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		p, why := literalCredential(tree(t, string(b)))
		require.Empty(t, p, "%s refused as %s", f, why)
	}
}

// TestSensitiveMarksTopmost: markings beneath a marked setting (a secret
// reference's fields, a vault plugin's settings) do not count.
func TestSensitiveMarksTopmost(t *testing.T) {
	m := sensitiveMarks()
	n := m.next["channels"].next["telegram"].next["webhookSecret"]
	require.True(t, n.field)
	require.Nil(t, n.next["id"], "the reference's own fields are not credentials")
	require.True(t, m.next["models"].next["providers"].next["*"].next["headers"].next["*"].entry)
	require.Equal(t, []string{"hooks", "mappings", "[]", "sessionKey"}, splitMarkPath("hooks.mappings[].sessionKey"))
}

func TestHighEntropy(t *testing.T) {
	for s, want := range map[string]bool{
		randomish: true, "0123456789abcdef0123456789abcdef": true,
		"assistants=v2": false, "eu-west-1": false, "/usr/local/bin/something-long": false,
		"2026.9.6-rc1": false, "alllowercaselettersonlyhere": false, "https://example.com/abc123def456": false,
		"hello world this is words 123": false,
	} {
		require.Equal(t, want, highEntropy(s), s)
	}
	require.True(t, credentialName("X-Custom-Auth"))
	require.True(t, credentialName("OPENAI_API_KEY"))
	require.True(t, credentialName("x-api-key"))
	require.True(t, credentialName("clientSecret"))
	require.False(t, credentialName("x-org"))
	require.False(t, credentialName("CODEX_HOME"))
	require.False(t, strings.Contains(strings.Join(nameWords("OpenAI-Beta"), ","), "auth"))
}

func tree(t *testing.T, doc string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(doc), &m))
	return m
}

// FuzzLiteralCredential: a credential-shaped value planted under any env
// variable name, after any prefix, is refused naming exactly its path and
// never echoed; any value at a setting the runtime marks sensitive is
// refused unless it is a reference or public material; nothing panics.
func FuzzLiteralCredential(f *testing.F) {
	for _, s := range []struct{ key, value string }{
		{"OPENAI_API_KEY", "${OPENAI_API_KEY}"}, {"X", "plain"}, {"a.b", "https://u:p@h/"}, {"", ""},
		{"weird key\"", "Bearer ${T}"}, {"LONG", randomish}, {"K", "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----"},
	} {
		f.Add(s.key, s.value)
	}
	f.Fuzz(func(t *testing.T, key, value string) {
		planted := map[string]any{"env": map[string]any{"vars": map[string]any{key: value + " " + keyOpenAI}}}
		p, why := literalCredential(planted)
		require.Equal(t, keyPath("env.vars", key), p)
		require.Equal(t, ReasonShape, why)
		doc, err := json.Marshal(planted)
		require.NoError(t, err)
		if err := ValidateConfiguration(doc); err != nil {
			raw, _ := json.Marshal(err)
			require.NotContains(t, err.Error()+string(raw), keyOpenAI)
		}

		marked := map[string]any{"models": map[string]any{"providers": map[string]any{"p": map[string]any{"apiKey": value}}}}
		p, _ = literalCredential(marked)
		v := strings.TrimSpace(value)
		passes := v == "" || reference.MatchString(v) || publicMaterial(v)
		require.Equal(t, passes, p == "", "value %q", value)
		if !passes {
			require.Equal(t, "models.providers.p.apiKey", p)
		}
	})
}
