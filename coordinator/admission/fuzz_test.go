package admission

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

// seedDocuments is the realistic corpus both fuzz targets start from.
func seedDocuments() []string {
	docs := []string{docAnthropic, docCodex, docOpenAIOC, `{}`, `{"agents":{"list":[]}}`,
		`{"agents":{"defaults":{"model":{"primary":"openai/a","fallbacks":["openai/b"]},"models":{"openai/a":{"agentRuntime":{"id":"codex"}},"openai/b":{"agentRuntime":{"id":"codex"}}}}},` + pluginWS + `}`,
		`{"agents":{"entries":{"main":{"model":"codex/gpt-5.5","models":{"codex/gpt-5.5":{"agentRuntime":{"id":"codex"}}}}}},"env":{"vars":{"CODEX_HOME":"/x"}}}`,
		`{"agents":{"defaults":{"model":"openai/a"}},"models":{"providers":{"openai":{"apiKey":"${OPENAI_API_KEY}","agentRuntime":{"id":"openclaw"},"headers":{"x-org":"o"}}}},"logging":{"level":"debug","redactSensitive":"tools"},"diagnostics":{"otel":{"enabled":true,"logs":true}}}`,
	}
	for _, ex := range Examples() {
		docs = append(docs, ex.Document)
	}
	return docs
}

func FuzzDecodeDocument(f *testing.F) {
	for _, d := range seedDocuments() {
		f.Add([]byte(d))
	}
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(`{"agents":{"defaults":{"model":{"primary":"x/y","fallbacks":[1]}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := DecodeDocument(b)
		if err != nil {
			var ae *Error
			require.True(t, errors.As(err, &ae), "%T %v", err, err)
			require.Equal(t, codes.InvalidRequest, ae.Code)
			require.Equal(t, http.StatusBadRequest, ae.Status)
			require.NotEmpty(t, ae.Rule())
			return
		}
		// The canonical form round-trips to the same canonical form.
		c1, err := canonical(d.tree)
		require.NoError(t, err)
		require.True(t, json.Valid(c1))
		d2, err := DecodeDocument(c1)
		require.NoError(t, err)
		c2, err := canonical(d2.tree)
		require.NoError(t, err)
		require.Equal(t, string(c1), string(c2))
		_ = ValidateConfiguration(b) // must not panic
	})
}

func FuzzAdmit(f *testing.F) {
	methods := []string{AuthAPIKey, AuthCodexPAT, AuthChatGPTServiceAccount, AuthOAuth, AuthCredentialSource, AuthRuntime, ""}
	for i, d := range seedDocuments() {
		for _, mode := range []string{emb, ded} {
			f.Add([]byte(d), mode, methods[i%len(methods)], uint8(i))
		}
	}
	f.Fuzz(func(t *testing.T, doc []byte, mode, method string, flags uint8) {
		in := input(string(doc), mode, method)
		if flags&1 != 0 {
			in.Installation.NativeWorkerSupport = "pinned-runtime"
		}
		if flags&2 != 0 {
			in.Installation.SandboxDriver = "openshell"
		}
		if flags&4 != 0 {
			in.Installation.CredentialGateway = "cg"
		}
		if flags&8 != 0 && in.Agent.HarnessAuth != nil {
			in.Agent.HarnessAuth.CredentialKind = []string{KindSecret, KindServiceAccount, KindCredentialGateway, "x"}[flags>>6]
		}
		if flags&16 != 0 {
			in.LogLevel = "debug"
		}
		if flags&32 != 0 {
			in.Auth = AuthSupport{contract.DedicatedCodex: {AuthAPIKey}}
		}
		before := cloneInput(in)
		out, err := Admit(in)
		require.Equal(t, before, in, "Admit mutated its input")
		if err != nil {
			var ae *Error
			require.True(t, errors.As(err, &ae), "%T %v", err, err)
			require.True(t, ValidCode(ae.Code), ae.Code)
			require.Equal(t, map[codes.Code]int{codes.InvalidRequest: 400, codes.NotFound: 404, codes.ResourceConflict: 409}[ae.Code], ae.Status)
			require.NotEmpty(t, ae.Rule())
			require.Equal(t, Output{}, out)
			return
		}
		topo, _ := contract.Of(out.Harness.ID, out.Mode)
		require.Contains(t, []contract.Topology{contract.Embedded, contract.DedicatedCodex, contract.DedicatedOpenClaw}, topo)
		if topo == contract.DedicatedOpenClaw {
			require.NotEmpty(t, in.Installation.NativeWorkerSupport)
			require.NotEmpty(t, in.Installation.SandboxDriver)
		}
		require.True(t, json.Valid(out.Document))
		require.True(t, json.Valid(out.Rendered))
		logging, ok := get(t, out.Document, "logging").(map[string]any)
		require.True(t, ok)
		require.NotContains(t, logging, "redactSensitive")
		require.Equal(t, false, get(t, out.Document, "diagnostics.otel.logs"))
		// Deterministic, and the admitted document admits to itself.
		again, err := Admit(in)
		require.NoError(t, err)
		require.Equal(t, out, again)
		in2 := in
		in2.Configuration.Document = out.Document
		fixed, err := Admit(in2)
		require.NoError(t, err)
		require.Equal(t, string(out.Document), string(fixed.Document))
		require.Contains(t, []string{state.HarnessOpenClaw, state.HarnessCodex}, out.Harness.ID)
	})
}
