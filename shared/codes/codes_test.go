package codes

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWellFormed(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"READY", true}, {"A", true}, {"MODEL_PROBE_FAILED", true}, {"X9_", true},
		{"", false}, {"ready", false}, {"9A", false}, {"_A", false}, {"A-B", false},
		{"A" + string(make([]byte, 64)), false},
		{"ABCDEFGHIJABCDEFGHIJABCDEFGHIJABCDEFGHIJABCDEFGHIJABCDEFGHIJABCD", true},   // 64
		{"ABCDEFGHIJABCDEFGHIJABCDEFGHIJABCDEFGHIJABCDEFGHIJABCDEFGHIJABCDE", false}, // 65
	} {
		require.Equal(t, tc.ok, WellFormed(tc.in), tc.in)
	}
}

func TestRevisionFailureTable(t *testing.T) {
	for held, want := range map[Code]Code{
		AuthenticationFailed: RevisionAuthenticationFailed,
		ModelProbeCPUStarved: RevisionCPUStarved,
		ModelProbeTimeout:    RevisionModelProbeTimeout,
		ModelProbeFailed:     RevisionModelProbeFailed,
		LoginFailed:          RevisionLoginFailed,
		Unavailable:          RevisionStartupFailed,
		IncompatibleResponse: RevisionStartupFailed,
		"SOMETHING_ELSE":     RevisionStartupFailed,
	} {
		require.Equal(t, want, RevisionFailure(held), held)
	}
}

func TestSetsAreClosed(t *testing.T) {
	require.True(t, IsProbe(Ready))
	require.False(t, IsProbe(LoginFailed))
	require.True(t, IsRuntimeDiagnostic(LoginFailed))
	require.False(t, IsRuntimeDiagnostic(Ready))
	require.True(t, IsFailureClass(ClassNetwork))
	require.False(t, IsFailureClass("Network"))
	require.True(t, IsCauseKind(CauseProcessExit))
	require.False(t, IsCauseKind("EXIT"))
}
