package supervise_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/supervise"
)

func TestEnv(t *testing.T) {
	base := []string{"PATH=/bin", "OPENAI_API_KEY=sk-x", "CODEX_PAT=p", "CODEX_HOME=/h", "HOME=/root", "garbage", "=x"}
	cases := []struct {
		drop []string
		want []string
	}{
		{nil, []string{"PATH=/bin", "OPENAI_API_KEY=sk-x", "CODEX_PAT=p", "CODEX_HOME=/h", "HOME=/root"}},
		{[]string{"OPENAI_API_KEY"}, []string{"PATH=/bin", "CODEX_PAT=p", "CODEX_HOME=/h", "HOME=/root"}},
		{[]string{"OPENAI_API_KEY", "CODEX_*"}, []string{"PATH=/bin", "HOME=/root"}},
		{[]string{"*"}, []string{}},
		{[]string{"PATH="}, []string{"PATH=/bin", "OPENAI_API_KEY=sk-x", "CODEX_PAT=p", "CODEX_HOME=/h", "HOME=/root"}},
	}
	for _, tc := range cases {
		got := supervise.Env(base, tc.drop...)
		require.Equal(t, tc.want, got, "drop %v", tc.drop)
	}
	require.Len(t, base, 7, "base unchanged")
}

func TestMinimalEnv(t *testing.T) {
	t.Setenv("OCE_SUPERVISE_KEEP", "1")
	t.Setenv("OCE_SUPERVISE_SECRET", "s")
	require.Equal(t, []string{"OCE_SUPERVISE_KEEP=1"}, supervise.MinimalEnv("OCE_SUPERVISE_KEEP", "NOT_SET_ANYWHERE"))
	got := supervise.MinimalEnv("OCE_SUPERVISE_*")
	require.ElementsMatch(t, []string{"OCE_SUPERVISE_KEEP=1", "OCE_SUPERVISE_SECRET=s"}, got)
	require.Empty(t, supervise.MinimalEnv())
}

// Env's output is a well-formed subset of its input with no dropped name.
func FuzzEnv(f *testing.F) {
	f.Add("A=1\nB=2\nSECRET=x", "SECRET")
	f.Add("A=1\n=2\nnoeq\nAB=3", "A*")
	f.Fuzz(func(t *testing.T, env, drop string) {
		base := strings.Split(env, "\n")
		drops := strings.Split(drop, ",")
		got := supervise.Env(base, drops...)
		in := map[string]int{}
		for _, kv := range base {
			in[kv]++
		}
		for _, kv := range got {
			name, _, ok := strings.Cut(kv, "=")
			require.True(t, ok)
			require.NotEmpty(t, name)
			require.Positive(t, in[kv])
			in[kv]--
			for _, d := range drops {
				if p, ok := strings.CutSuffix(d, "*"); ok {
					require.False(t, strings.HasPrefix(name, p))
				} else {
					require.NotEqual(t, d, name)
				}
			}
		}
	})
}
