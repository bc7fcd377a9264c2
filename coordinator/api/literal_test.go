package api_test

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLiteralCredentialNeverProposed plants a literal credential at every
// kind of place a Configuration can carry one, through create and update:
// each is refused 400 INVALID_REQUEST naming its path, the answer does not
// echo it, and no log entry the Raft log would store and replicate ever
// holds its bytes.
func TestLiteralCredentialNeverProposed(t *testing.T) {
	const planted = "sk-PLANTED-literal-7f3a9c"
	e := newEnv(t)
	var mu sync.Mutex
	var entries [][]byte
	e.b.EntryHook = func(b []byte) {
		mu.Lock()
		entries = append(entries, append([]byte(nil), b...))
		mu.Unlock()
	}
	e.seed()
	for _, tc := range []struct{ path, doc string }{
		{"models.providers.openai.apiKey", `{"agents":{"defaults":{"model":{"primary":"openai/gpt-5.5"},"models":{"openai/gpt-5.5":{"agentRuntime":{"id":"openclaw"}}}}},
			"models":{"providers":{"openai":{"apiKey":"` + planted + `"}}}}`},
		{"models.providers.custom.headers.Authorization", `{"models":{"providers":{"custom":{"baseUrl":"https://models.example/v1","headers":{"Authorization":"Bearer ` + planted + `"}}}}}`},
		{"gateway.auth.password", `{"gateway":{"mode":"local","auth":{"mode":"password","password":"` + planted + `"}}}`},
		{"channels.telegram.botToken", `{"channels":{"telegram":{"botToken":"` + planted + `"}}}`},
	} {
		for _, op := range []struct{ method, url string }{
			{"POST", "/v1/namespaces/team/configurations"},
			{"PUT", "/v1/namespaces/team/configurations/cfg"},
		} {
			body := map[string]any{"name": "leaky", "document": json.RawMessage(tc.doc)}
			if op.method == "PUT" {
				body = map[string]any{"document": json.RawMessage(tc.doc)}
			}
			m := e.reject(400, "INVALID_REQUEST", op.method, op.url, body)
			details, _ := m["error"].(map[string]any)["details"].(map[string]any)
			require.Equal(t, tc.path, details["path"], "%s %s", op.method, tc.path)
			raw, err := json.Marshal(m)
			require.NoError(t, err)
			require.NotContains(t, string(raw), planted, "the refusal does not echo the credential")
		}
	}
	// A reference is accepted: secrets enter only that way.
	e.expect(201, "POST", "/v1/namespaces/team/configurations", map[string]any{"name": "ref",
		"document": json.RawMessage(`{"models":{"providers":{"openai":{"apiKey":"${OPENAI_API_KEY}"}}}}`)})

	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(entries), 4, "the seed and the reference were proposed")
	for _, b := range entries {
		require.False(t, bytes.Contains(b, []byte(planted)), "a log entry holds the planted credential")
		require.False(t, bytes.Contains(b, []byte("7f3a9c")))
	}
}
