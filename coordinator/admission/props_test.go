package admission

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

func exampleInput(ex Example) Input {
	in := input(ex.Document, ex.Topology.Mode(), AuthAPIKey)
	if ex.Topology == contract.DedicatedOpenClaw {
		in.Installation = nativeInstall
	}
	return in
}

func TestExamplesAdmit(t *testing.T) {
	for _, ex := range Examples() {
		t.Run(ex.Name, func(t *testing.T) {
			require.NoError(t, ValidateConfiguration([]byte(ex.Document)))
			out, err := Admit(exampleInput(ex))
			require.NoError(t, err)
			require.Equal(t, ex.Topology.Harness(), out.Harness.ID)
			require.Equal(t, ex.Topology.Mode(), out.Mode)
			require.NotEmpty(t, out.Harness.Version)
			// The revision freezes Document; GatewayDocument recomputes the
			// private gateway configuration from it exactly.
			gw, err := GatewayDocument(out.Document)
			require.NoError(t, err)
			require.JSONEq(t, string(out.Rendered), string(gw))
			if ex.Name == "custom-endpoint" {
				require.NotEqual(t, string(out.Document), string(gw), "the compile applies")
				require.Contains(t, string(gw), "codex/openai-compatible/vendor/org/model")
			}
		})
	}
}

// cloneInput deep-copies everything Admit could reach.
func cloneInput(in Input) Input {
	c := in
	if in.Configuration.Document != nil {
		c.Configuration.Document = append(json.RawMessage{}, in.Configuration.Document...)
	}
	if in.Agent.HarnessAuth != nil {
		a := *in.Agent.HarnessAuth
		c.Agent.HarnessAuth = &a
	}
	if in.Agent.Plugins != nil {
		c.Agent.Plugins = append([]string{}, in.Agent.Plugins...)
	}
	if in.Auth != nil {
		c.Auth = AuthSupport{}
		for k, v := range in.Auth {
			c.Auth[k] = append([]string(nil), v...)
		}
	}
	if in.HarnessVersions != nil {
		c.HarnessVersions = map[string]string{}
		for k, v := range in.HarnessVersions {
			c.HarnessVersions[k] = v
		}
	}
	return c
}

func TestAdmitNeverMutatesInput(t *testing.T) {
	for _, ex := range Examples() {
		in := exampleInput(ex)
		in.Auth = KubernetesAuthSupport()
		in.HarnessVersions = DefaultHarnessVersions()
		in.Agent.Plugins = []string{"memory"}
		before := cloneInput(in)
		out, err := Admit(in)
		require.NoError(t, err)
		require.True(t, reflect.DeepEqual(before, in), ex.Name)
		// The output does not alias the input's document bytes.
		require.NotEqual(t, string(in.Configuration.Document), string(out.Document))
		rendered := string(out.Rendered)
		out.Document[0] = 'X'
		require.Equal(t, rendered, string(out.Rendered), "Rendered does not alias Document")
		require.True(t, reflect.DeepEqual(before, in), ex.Name)
	}
	// Nor on refusal.
	in := input(`{"agents":{"defaults":{"model":"openai/a"}},"logging":{"redactSensitive":true}}`, emb, AuthAPIKey)
	before := cloneInput(in)
	_, err := Admit(in)
	require.ErrorIs(t, err, ErrInvalidRequest)
	require.True(t, reflect.DeepEqual(before, in))
}

func TestDocumentDeterministic(t *testing.T) {
	// The same configuration with keys in another order, other spacing.
	a := `{"logging":{"redactSensitive":true,"file":"/var/log/oc.log"},"agents":{"defaults":{"maxConcurrent":4,"model":{"primary":"anthropic/a","fallbacks":["anthropic/b"]}}},"x":{"n":1.50,"big":12345678901234567890,"s":"<&>"}}`
	b := "{\n \"x\": {\"s\": \"<&>\", \"big\": 12345678901234567890, \"n\": 1.50},\n \"agents\": {\"defaults\": {\"model\": {\"fallbacks\": [\"anthropic/b\"], \"primary\": \"anthropic/a\"}, \"maxConcurrent\": 4}},\n \"logging\": {\"file\": \"/var/log/oc.log\", \"redactSensitive\": true}\n}"
	outA, err := Admit(input(a, emb, AuthAPIKey))
	require.NoError(t, err)
	outB, err := Admit(input(b, emb, AuthAPIKey))
	require.NoError(t, err)
	require.Equal(t, string(outA.Document), string(outB.Document))
	for i := 0; i < 20; i++ {
		again, err := Admit(input(a, emb, AuthAPIKey))
		require.NoError(t, err)
		require.Equal(t, outA.Document, again.Document)
		require.Equal(t, outA.Rendered, again.Rendered)
	}
	// Numbers keep their literal form, HTML is not escaped, keys are sorted.
	require.Contains(t, string(outA.Document), `"big":12345678901234567890`)
	require.Contains(t, string(outA.Document), `"n":1.50`)
	require.Contains(t, string(outA.Document), `"s":"<&>"`)
	require.Equal(t, `{"agents":{"defaults":{"maxConcurrent":4,"model":{"fallbacks":["anthropic/b"],"primary":"anthropic/a"}}},"diagnostics":{"otel":{"logs":false}},"logging":{"consoleLevel":"info","consoleStyle":"json","file":"/var/log/oc.log","level":"info"},"x":{"big":12345678901234567890,"n":1.50,"s":"<&>"}}`, string(outA.Document))
	// Admitting the admitted document again is a fixed point.
	in := input(string(outA.Document), emb, AuthAPIKey)
	again, err := Admit(in)
	require.NoError(t, err)
	require.Equal(t, string(outA.Document), string(again.Document))
}

func TestErrorSentinels(t *testing.T) {
	for _, tc := range []struct {
		err      *Error
		sentinel error
	}{
		{invalid("r", "m"), ErrInvalidRequest},
		{conflict("r", "m"), ErrConflict},
		{notFound("r", "m"), ErrNotFound},
	} {
		require.ErrorIs(t, tc.err, tc.sentinel)
		wrapped := errors.Join(errors.New("context"), tc.err)
		require.ErrorIs(t, wrapped, tc.sentinel)
		for _, other := range []error{ErrInvalidRequest, ErrConflict, ErrNotFound} {
			if other != tc.sentinel {
				require.NotErrorIs(t, tc.err, other)
			}
		}
		require.True(t, ValidCode(tc.err.Code))
		require.Contains(t, tc.err.Error(), tc.err.Code)
	}
	require.False(t, ValidCode("INTERNAL"))
}

func TestResolveWithoutCandidateIsOpenClaw(t *testing.T) {
	d, err := DecodeDocument([]byte(`{"gateway":{"mode":"local"},"models":{"providers":{"openai":{"agentRuntime":{"id":"codex"}}}}}`))
	require.NoError(t, err)
	res, err := resolveHarness(d)
	require.NoError(t, err)
	require.Equal(t, state.HarnessOpenClaw, res.Harness)
	require.False(t, res.HasModel)
}

func TestValidateConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name, doc, rule string
	}{
		{"empty-object", `{}`, ""},
		{"agents-list-non-empty", `{"agents":{"list":["main"]}}`, RuleAgentsList},
		{"agents-list-not-array", `{"agents":{"list":{}}}`, RuleAgentsList},
		{"agents-list-empty", `{"agents":{"list":[]}}`, ""},
		{"agents-list-empty-beside-entries", `{"agents":{"list":[],"entries":{"main":{}}}}`, RuleAgentsList},
		{"entry-not-object", `{"agents":{"entries":{"main":"x"}}}`, RuleDocumentShape},
		{"entry-id-invalid", `{"agents":{"entries":{"-main":{}}}}`, RuleRoster},
		{"entry-ids-normalize-equal", `{"agents":{"ownership":"explicit","entries":{"Main":{},"main":{}}}}`, RuleRoster},
		{"entry-default-key", `{"agents":{"entries":{"main":{"default":true}}}}`, RuleRoster},
		{"ownership-not-explicit", `{"agents":{"ownership":"implicit"}}`, RuleRoster},
		{"explicit-without-entries", `{"agents":{"ownership":"explicit"}}`, RuleRoster},
		{"two-entries-explicit", `{"agents":{"ownership":"explicit","entries":{"a":{},"b":{}}}}`, ""},
		{"bad-api", `{"models":{"providers":{"x":{"api":"grpc"}}}}`, RuleProviderSettings},
		{"api-env-reference", `{"models":{"providers":{"x":{"api":"${MODEL_API}","baseUrl":"${BASE_URL:-https://a}"}}}}`, ""},
		{"blank-provider-base-url", `{"models":{"providers":{"openai":{"baseUrl":"  "}}}}`, ""},
		{"blank-model-base-url", `{"models":{"providers":{"x":{"models":[{"id":"m","baseUrl":""}]}}}}`, RuleProviderSettings},
		{"relative-base-url", `{"models":{"providers":{"x":{"baseUrl":"/v1"}}}}`, RuleProviderSettings},
		{"model-entry-without-id", `{"models":{"providers":{"x":{"models":[{"name":"m"}]}}}}`, RuleDocumentShape},
		{"fallback-provider", `{"agents":{"defaults":{"model":{"primary":"a/b","fallbacks":["c/d"]}}}}`, RuleFallbackProvider},
		{"plugin-enabled-not-bool", `{"plugins":{"entries":{"codex":{"enabled":"yes"}}}}`, RuleDocumentShape},
		{"env-vars-not-object", `{"env":{"vars":[]}}`, RuleDocumentShape},
		{"otel-not-object", `{"diagnostics":{"otel":true}}`, RuleDocumentShape},
		{"provider-headers-not-object", `{"models":{"providers":{"x":{"headers":["a"]}}}}`, RuleDocumentShape},
		{"invalid-utf8", "{\"a\":\"\xff\"}", RuleDocumentSyntax},
		{"too-deep", deepDoc(MaxDocumentDepth + 2), RuleDocumentSyntax},
		{"deep-enough", deepDoc(MaxDocumentDepth - 2), RuleSchema}, // not too deep; "a" is unknown to OpenClaw
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateConfiguration([]byte(tc.doc))
			if tc.rule == "" {
				require.NoError(t, err)
				return
			}
			var ae *Error
			require.True(t, errors.As(err, &ae), "%v", err)
			require.Equal(t, codes.InvalidRequest, ae.Code)
			require.Equal(t, tc.rule, ae.Rule(), ae.Message)
		})
	}
}

func deepDoc(n int) string {
	s := `1`
	for i := 0; i < n; i++ {
		s = `{"a":` + s + `}`
	}
	return s
}

func TestDecodeDocumentTooLarge(t *testing.T) {
	big := make([]byte, MaxDocumentBytes+1)
	_, err := DecodeDocument(big)
	require.ErrorIs(t, err, ErrInvalidRequest)
}

func TestDecodeDocumentSubset(t *testing.T) {
	d, err := DecodeDocument([]byte(ExampleCustomEndpoint))
	require.NoError(t, err)
	require.Equal(t, "codex", d.Agents.Defaults.Model.Primary.Provider)
	require.Equal(t, "vendor/org/model", d.Agents.Defaults.Model.Primary.Model)
	require.Len(t, d.Agents.Defaults.Model.Fallbacks, 1)
	p := d.Providers["codex"]
	require.True(t, p.CustomEndpoint())
	require.Equal(t, "codex", p.Runtime.ID)
	require.Len(t, p.Models, 2)
	require.Equal(t, "websocket", d.Plugins["codex"].AppServerTransport)
	require.True(t, *d.Plugins["codex"].Enabled)
}

func BenchmarkAdmit(b *testing.B) {
	for _, ex := range Examples() {
		in := exampleInput(ex)
		b.Run(ex.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Admit(in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(in.Configuration.Document)), "doc-bytes")
		})
	}
}
