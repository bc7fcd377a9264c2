package memlimit

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseLimit(t *testing.T) {
	for _, tc := range []struct {
		content string
		want    int64
		ok      bool
	}{
		{"536870912\n", 512 << 20, true},      // v1 or v2, a limit
		{"max\n", 0, false},                   // v2, none
		{"9223372036854771712\n", 0, false},   // v1, none
		{"4611686018427387904", 0, false},     // at the v1 bound
		{"", 0, false},                        // empty
		{"-1", 0, false},                      // negative
		{"0", 0, false},                       // zero
		{"12k", 0, false},                     // not a count
		{"99999999999999999999999", 0, false}, // past int64
	} {
		got, ok := ParseLimit(tc.content)
		require.Equal(t, tc.ok, ok, "%q", tc.content)
		require.Equal(t, tc.want, got, "%q", tc.content)
	}
}

// TestApply: the soft limit follows the first cgroup file naming a limit,
// at Fraction of it; GOMEMLIMIT or no limit leave the runtime's as it was.
func TestApply(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	v2None, v1Limit := write("memory.max", "max\n"), write("memory.limit_in_bytes", "1073741824\n")
	missing := filepath.Join(dir, "absent")
	noEnv := func(string) string { return "" }

	debug.SetMemoryLimit(math.MaxInt64)
	require.Equal(t, int64(0), Apply(noEnv, missing, v2None), "no limit anywhere")
	require.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1))

	gib := float64(1 << 30)
	want := int64(gib * Fraction)
	require.Equal(t, want, Apply(noEnv, missing, v2None, v1Limit), "the first file naming a limit")
	require.Equal(t, want, debug.SetMemoryLimit(-1))

	debug.SetMemoryLimit(math.MaxInt64)
	operator := func(k string) string {
		if k == "GOMEMLIMIT" {
			return "3GiB"
		}
		return ""
	}
	require.Equal(t, int64(0), Apply(operator, v1Limit), "GOMEMLIMIT is the operator's choice")
	require.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1))
}

// FuzzParseLimit: any file content parses to a positive limit below the
// v1 "none" bound, or to none.
func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{"max\n", "536870912\n", "9223372036854771712\n", "", "-1", "0x10", " 42 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, content string) {
		n, ok := ParseLimit(content)
		if ok && (n <= 0 || n >= unlimitedV1) {
			t.Fatalf("%q: limit %d", content, n)
		}
		if !ok && n != 0 {
			t.Fatalf("%q: no limit but %d", content, n)
		}
	})
}
