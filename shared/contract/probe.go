package contract

import (
	"strings"
	"time"
)

// ModelProbeFreshFor is how long a model probe that passed before cutover
// vouches for the candidate: a gateway started later than this probes again
// at its start (the seeds' order). Activation follows readiness within
// seconds; the bound keeps a restart long after cutover from skipping the
// check it would otherwise make.
const ModelProbeFreshFor = 10 * time.Minute

// ModelProbeStatus is the StatusModelProbe section of a probe-only gatewayd.
type ModelProbeStatus struct {
	Code       string `json:"code"`       // READY once passed
	PassedAtMs int64  `json:"passedAtMs"` // Unix milliseconds
}

// Endpoint is one model endpoint override a driver renders: the variable
// (EnvProviderBaseURLPrefix + provider) and its value.
type Endpoint struct{ Name, Value string }

// ProviderEndpoints renders endpoint overrides (ProviderOpenAI /
// ProviderAnthropic → base URL) for a supervisor, in Providers order.
// gatewayd takes the provider's origin (it appends /v1/… like the upfront
// check); harnessd hands the value to Codex as base_url, which Codex POSTs
// {base_url}/responses to, so the Harness (harness true) gets the /v1 base
// (docs/design/codex.md#s4).
func ProviderEndpoints(bases map[string]string, harness bool) []Endpoint {
	var out []Endpoint
	for _, p := range Providers() {
		u := strings.TrimRight(bases[p], "/")
		if u == "" {
			continue
		}
		if harness && !strings.HasSuffix(u, "/v1") {
			u += "/v1"
		}
		out = append(out, Endpoint{Name: EnvProviderBaseURLPrefix + p, Value: u})
	}
	return out
}
