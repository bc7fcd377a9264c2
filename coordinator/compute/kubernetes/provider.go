package kubernetes

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"oce.dev/oce/shared/contract"
)

// providerEnv renders Config.ProviderBaseURLs into a supervisor's
// environment, so the runtimes call the same endpoint the coordinator's
// pre-cutover credential check calls. gatewayd takes the provider's origin;
// harnessd hands the value to Codex as base_url (it POSTs
// {base_url}/responses), so the Harness gets the /v1 base (CODEX.md §4).
func (d *Driver) providerEnv(harness bool) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, p := range contract.Providers() {
		u := strings.TrimRight(d.cfg.ProviderBaseURLs[p], "/")
		if u == "" {
			continue
		}
		if harness && !strings.HasSuffix(u, "/v1") {
			u += "/v1"
		}
		out = append(out, corev1.EnvVar{Name: contract.EnvProviderBaseURLPrefix + p, Value: u})
	}
	return out
}
