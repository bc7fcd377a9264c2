package kubernetes

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"oce.dev/oce/shared/codes"
)

// FuzzProviderHarnessReady feeds arbitrary runtime-failure conditions and
// Ready statuses to the readiness rule: it never panics, is ready only for
// a single Ready=True candidate without a hold, and reports only closed-set
// held codes and cause kinds.
func FuzzProviderHarnessReady(f *testing.F) {
	f.Add("True", "AUTHENTICATION_FAILED", `{"check":"model-probe"}`, "True", false)
	f.Add("True", "MODEL_PROBE_FAILED", `{"check":"model-probe","cause":{"kind":"PROCESS_EXIT","detail":"exit-1"}}`, "False", true)
	f.Add("False", "", "", "True", false)
	f.Add("Bogus", "X", "{", "Maybe", true)
	f.Fuzz(func(t *testing.T, heldStatus, reason, message, readyStatus string, second bool) {
		p := pod("a", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionStatus(readyStatus)},
				{Type: ConditionRuntimeFailure, Status: corev1.ConditionStatus(heldStatus), Reason: reason, Message: message},
			}
		})
		l := list(p)
		if second {
			l.Items = append(l.Items, pod("b"))
		}
		r := ProviderHarnessReady(l, "dp", wantLabels)
		if r.Ready {
			require.False(t, second)
			require.Equal(t, "True", readyStatus)
			require.Empty(t, r.HeldCode)
		}
		if r.HeldCode != "" {
			require.True(t, codes.IsRuntimeDiagnostic(r.HeldCode))
			require.Equal(t, "True", heldStatus)
		}
		if r.Cause != nil {
			require.True(t, codes.IsCauseKind(r.Cause.Kind))
		}
	})
}
