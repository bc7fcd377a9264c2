package credref

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Ref
	}{
		{"credential:model", Ref{Name: "model"}},
		{"credential:model#openai-api-key", Ref{Name: "model", Key: "openai-api-key"}},
		{"credential:team/model#k.1_X", Ref{Namespace: "team", Name: "model", Key: "k.1_X"}},
		{"credential:team/model", Ref{Namespace: "team", Name: "model"}},
		{"secret:model-keys#good", Ref{Name: "model-keys", Key: "good", Legacy: true}},
		{"secret://team/anthropic#key", Ref{Namespace: "team", Name: "anthropic", Key: "key", Legacy: true}},
		{"local:demo-key", Ref{Name: "demo-key", Legacy: true}},
	} {
		got, err := Parse(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
		again, err := Parse(got.String())
		require.NoError(t, err, "the canonical spelling of %s parses", tc.in)
		want := tc.want
		want.Legacy = false
		require.Equal(t, want, again, "canonical spelling of %s", tc.in)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, in := range []string{
		"", "model", "credential:", "credential:#k", "credential:Model", "credential:model#", "credential:model#a b",
		"credential:/model", "credential:Team/model", "credential:team/", "credential:a/b/c", "credential:model#..",
		"credential:model#k#k", "secret:model", "secret:#key", "secret:model#", "secret://team", "secret://team/model",
		"secret:///model#k", "secret://team/Model#k", "local:", "local:../k", "local:/etc/passwd", "local:k#key",
		"local:Demo.Key", "file:/etc/passwd", " credential:model", "credential:model ", "credential:" + strings.Repeat("a", 64),
		"credential:model#" + strings.Repeat("k", 254), "credential:m#" + strings.Repeat("k", MaxLen),
	} {
		_, err := Parse(in)
		require.ErrorIs(t, err, ErrSyntax, "%q", in)
		if tail := in[min(len(in), len("credential:")):]; len(tail) > 3 {
			require.NotContains(t, err.Error(), tail, "the error does not repeat the text of %q", in)
		}
	}
}

func TestIn(t *testing.T) {
	r, err := Parse("credential:team/model")
	require.NoError(t, err)
	require.True(t, r.In("team"))
	require.False(t, r.In("other"))
	r, err = Parse("credential:model")
	require.NoError(t, err)
	require.True(t, r.In("other"), "an unqualified reference means the Agent's own Namespace")
}

func TestKeyIn(t *testing.T) {
	for _, tc := range []struct {
		ref  string
		keys []string
		want string
		err  bool
	}{
		{"credential:m", []string{"value"}, "value", false},
		{"credential:m", []string{"a", "b"}, "", true},
		{"credential:m", nil, "", true},
		{"credential:m#b", []string{"a", "b"}, "b", false},
		{"credential:m#c", []string{"a", "b"}, "", true},
	} {
		r, err := Parse(tc.ref)
		require.NoError(t, err)
		got, err := r.KeyIn(tc.keys)
		require.Equal(t, tc.err, errors.Is(err, ErrNoKey), "%s over %v: %v", tc.ref, tc.keys, err)
		require.Equal(t, tc.want, got)
	}
}
