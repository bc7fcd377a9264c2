package server

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProviderBaseURLsFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	got, err := providerBaseURLs(env(nil))
	require.NoError(t, err)
	require.Nil(t, got)
	got, err = providerBaseURLs(env(map[string]string{"OCE_MODEL_PROVIDER_BASE_URL_OPENAI": "http://127.0.0.1:9000"}))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"OPENAI": "http://127.0.0.1:9000"}, got)
	for _, bad := range []string{"127.0.0.1:9000", "ftp://x", "http://", "::"} {
		_, err = providerBaseURLs(env(map[string]string{"OCE_MODEL_PROVIDER_BASE_URL_ANTHROPIC": bad}))
		require.Error(t, err, bad)
	}
}
