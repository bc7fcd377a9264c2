package modelref

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, provider, model string
		ok                  bool
	}{
		{"openai/gpt-6-sol", "openai", "gpt-6-sol", true},
		{"codex/vendor/org/model", "codex", "vendor/org/model", true},
		{"anthropic/claude-x", "anthropic", "claude-x", true},
		{"openai/", "", "", false},
		{"/model", "", "", false},
		{"nomodel", "", "", false},
		{"", "", "", false},
		{"open ai/x", "", "", false},
		{"openai/x\n", "", "", false},
	} {
		r, err := Parse(tc.in)
		if !tc.ok {
			require.ErrorIs(t, err, ErrInvalid, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.provider, r.Provider)
		require.Equal(t, tc.model, r.Model)
		require.Equal(t, tc.in, r.String())
	}
}

func TestMatchesCatalogID(t *testing.T) {
	r, err := Parse("codex/vendor/org/model")
	require.NoError(t, err)
	require.True(t, r.MatchesCatalogID("vendor/org/model"))
	require.True(t, r.MatchesCatalogID("codex/vendor/org/model"))
	require.False(t, r.MatchesCatalogID("org/model"))
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"openai/gpt", "codex/a/b/c", "/", "a/", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			return
		}
		require.Equal(t, s, r.String())
		require.NotEmpty(t, r.Provider)
		require.NotEmpty(t, r.Model)
		require.NotContains(t, r.Provider, "/")
	})
}
