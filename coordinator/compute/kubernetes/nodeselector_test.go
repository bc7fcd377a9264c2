package kubernetes

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseNodeSelector(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
		ok   bool
	}{
		{"", nil, true},
		{"  ", nil, true},
		{"pool=trusted", map[string]string{"pool": "trusted"}, true},
		{" oce.dev/pool = gateways , kubernetes.io/os=linux ", map[string]string{"oce.dev/pool": "gateways", "kubernetes.io/os": "linux"}, true},
		{"pool=", map[string]string{"pool": ""}, true},
		{"pool", nil, false},
		{"=x", nil, false},
		{"pool=a,pool=b", nil, false},
		{"bad key=x", nil, false},
		{"pool=not a value", nil, false},
		{"pool=a,,", nil, false},
	} {
		got, err := ParseNodeSelector(tc.in)
		if !tc.ok {
			require.ErrorIs(t, err, ErrBadNodeSelector, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
}

// FuzzParseNodeSelector: never panics; what it accepts formats and parses
// back to the same selector.
func FuzzParseNodeSelector(f *testing.F) {
	for _, s := range []string{"", "pool=trusted", "a=b,c=d", "oce.dev/pool=x", "x", "=", "a=b,a=c", " k = v "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseNodeSelector(s)
		if err != nil {
			require.ErrorIs(t, err, ErrBadNodeSelector)
			return
		}
		back, err := ParseNodeSelector(FormatNodeSelector(m))
		require.NoError(t, err)
		if len(m) == 0 {
			require.Empty(t, back)
			return
		}
		require.Equal(t, m, back)
	})
}
