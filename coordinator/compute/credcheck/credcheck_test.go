package credcheck

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/probe/fakeprovider"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

func rev(doc string) state.Revision {
	return state.Revision{ID: "r1", Harness: state.HarnessIdentity{ID: state.HarnessOpenClaw}, Mode: state.ModeEmbedded,
		Document: []byte(doc), HarnessAuth: &state.HarnessAuth{Method: "api_key", SourceRef: "local:k"}}
}

const openaiDoc = `{"agents":{"defaults":{"model":{"primary":"openai/gpt-fake-1"},"models":{"openai/gpt-fake-1":{"agentRuntime":{"id":"openclaw"}}}}}}`

func keyed(key string) compute.CredentialsFunc {
	return func(context.Context, state.Revision) (map[string][]byte, error) {
		return map[string][]byte{contract.SecretModelAPIKey: []byte(key)}, nil
	}
}

// TestCheck: the coordinator's pre-cutover check makes the upfront check's
// request against the endpoint the runtimes use: a good key passes, a 401 or
// a 403 rejects it with the closed diagnostics, and what cannot be judged
// here (no binding, an unreachable provider) is left to the runtime.
func TestCheck(t *testing.T) {
	fp, err := fakeprovider.Start(t.Context(), fakeprovider.Options{ValidKeys: []string{"sk-good"}})
	require.NoError(t, err)
	t.Cleanup(func() { fp.Close() })
	bases := map[string]string{contract.ProviderOpenAI: fp.URL()}

	res, err := Checker{Credentials: keyed("sk-good"), ProviderBaseURLs: bases}.Check(t.Context(), rev(openaiDoc))
	require.NoError(t, err)
	require.Equal(t, state.CredentialPassed, res.Outcome)

	res, err = Checker{Credentials: keyed("sk-bad"), ProviderBaseURLs: bases}.Check(t.Context(), rev(openaiDoc))
	require.NoError(t, err)
	require.Equal(t, state.CredentialRejected, res.Outcome)
	require.Equal(t, codes.AuthenticationFailed, res.HeldCode)
	require.Equal(t, "401", res.Diagnostics["status"])
	require.Equal(t, "json-error-code", res.Diagnostics["bodyShape"])
	require.NotContains(t, res.Diagnostics, "key")

	fp.SetFault(fakeprovider.Fault403)
	res, err = Checker{Credentials: keyed("sk-good"), ProviderBaseURLs: bases}.Check(t.Context(), rev(openaiDoc))
	require.NoError(t, err)
	require.Equal(t, state.CredentialRejected, res.Outcome, "403 rejects too (docs/design/seed-001.md)")
	require.Equal(t, "403", res.Diagnostics["status"])
	fp.SetFault(fakeprovider.FaultNone)
	require.Equal(t, int64(3), fp.UpfrontRequests(), "one request per check")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + ln.Addr().String()
	ln.Close()
	res, err = Checker{Credentials: keyed("sk-bad"), ProviderBaseURLs: map[string]string{contract.ProviderOpenAI: dead}}.Check(t.Context(), rev(openaiDoc))
	require.NoError(t, err)
	require.Equal(t, compute.CredentialCheck{Outcome: state.CredentialSkipped, Reason: "unreachable"}, res)

	res, err = Checker{ProviderBaseURLs: bases}.Check(t.Context(), rev(openaiDoc))
	require.NoError(t, err)
	require.Equal(t, state.CredentialSkipped, res.Outcome, "no credential service")
	noModel := rev(`{}`)
	res, err = Checker{Credentials: keyed("sk-bad"), ProviderBaseURLs: bases}.Check(t.Context(), noModel)
	require.NoError(t, err)
	require.Equal(t, compute.CredentialCheck{Outcome: state.CredentialSkipped, Reason: "model"}, res)

	boom := errors.New("secret store down")
	_, err = Checker{Credentials: compute.CredentialsFunc(func(context.Context, state.Revision) (map[string][]byte, error) {
		return nil, boom
	}), ProviderBaseURLs: bases}.Check(t.Context(), rev(openaiDoc))
	require.ErrorIs(t, err, boom)
}
