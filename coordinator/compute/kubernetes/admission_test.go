package kubernetes

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAdmissionRate(t *testing.T) {
	for _, tc := range []struct {
		qps       float64
		perSecond float64
		burst     int
	}{
		{0, 0, 0}, // unlimited client: no admission limit
		{50, 50.0 / ActivationRequestBudget, 2},
		{5, 5.0 / ActivationRequestBudget, 1}, // client-go's default: still one at a time
		{500, 500.0 / ActivationRequestBudget, 22},
	} {
		d := &Driver{cfg: Config{ClientQPS: tc.qps}}
		r, b := d.AdmissionRate()
		require.InDelta(t, tc.perSecond, r, 1e-9, "qps %v", tc.qps)
		require.Equal(t, tc.burst, b, "qps %v", tc.qps)
	}
}
