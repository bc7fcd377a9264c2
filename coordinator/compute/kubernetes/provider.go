package kubernetes

import (
	corev1 "k8s.io/api/core/v1"

	"oce.dev/oce/shared/contract"
)

// providerEnv renders Config.ProviderBaseURLs into a supervisor's
// environment (contract.ProviderEndpoints), so the runtimes call the same
// endpoint the coordinator's pre-cutover credential check calls.
func (d *Driver) providerEnv(harness bool) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range contract.ProviderEndpoints(d.cfg.ProviderBaseURLs, harness) {
		out = append(out, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	return out
}
