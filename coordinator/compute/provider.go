package compute

import (
	"strings"

	"oce.dev/oce/shared/contract"
)

// ProviderBaseEnv renders a driver's model endpoint overrides (provider
// suffix → base URL, e.g. the offline fake provider, or an operator's
// model proxy) as the supervisors' environment, name/value pairs in
// contract.Providers() order. gatewayd takes the provider's origin (it
// appends /v1/… like the upfront check); harnessd hands the value to Codex
// as base_url, which Codex POSTs {base_url}/responses to, so the Harness
// gets the /v1 base (design/CODEX.md §4).
func ProviderBaseEnv(bases map[string]string, harness bool) [][2]string {
	var out [][2]string
	for _, p := range contract.Providers() {
		u := strings.TrimRight(bases[p], "/")
		if u == "" {
			continue
		}
		if harness && !strings.HasSuffix(u, "/v1") {
			u += "/v1"
		}
		out = append(out, [2]string{contract.EnvProviderBaseURLPrefix + p, u})
	}
	return out
}
