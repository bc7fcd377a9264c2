package server

import (
	"fmt"
	"net/url"

	"oce.dev/oce/shared/contract"
)

// providerBaseURLs reads the model endpoint overrides of the Kubernetes
// driver from the coordinator's environment — the runtime contract's own
// names, OCE_MODEL_PROVIDER_BASE_URL_OPENAI and _ANTHROPIC (tests: the
// offline fake provider). The driver renders them into the runtimes and the
// pre-cutover credential check calls the same endpoint. nil when none is set.
func providerBaseURLs(getenv func(string) string) (map[string]string, error) {
	var out map[string]string
	for _, p := range contract.Providers() {
		name := contract.EnvProviderBaseURLPrefix + p
		v := getenv(name)
		if v == "" {
			continue
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("server: %s must be an http(s) URL", name)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[p] = v
	}
	return out, nil
}
