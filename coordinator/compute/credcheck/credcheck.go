// Package credcheck is the coordinator's pre-cutover credential check
// (issue 14, M14): the runtime's upfront check (probe/upfront) run by a
// trusted component with the candidate revision's resolved credential,
// before any predecessor is stopped. 401 and 403 reject, with upfront's
// closed-set diagnostics; every other answer, an unreachable provider or a
// check that does not apply is left to the runtime's own startup check.
package credcheck

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/probe/upfront"
	"oce.dev/oce/shared/contract"
)

// Checker checks revisions' credentials against the model provider.
type Checker struct {
	// Credentials resolves the revision's binding; nil skips every check.
	Credentials compute.Credentials
	// ProviderBaseURLs maps OPENAI / ANTHROPIC to the endpoint the runtimes
	// use instead of the default (the offline fake provider); the runtimes
	// treat such an override as the default endpoint, and so does the check.
	ProviderBaseURLs map[string]string
	// HTTPClient is the client (default http.DefaultClient).
	HTTPClient *http.Client
}

// credentialFiles are the secret files a binding resolves to that carry a
// provider API key, in the order they are tried.
var credentialFiles = []string{contract.SecretModelAPIKey, contract.SecretOpenAIAPIKey}

// Check implements the check for one revision.
func (c Checker) Check(ctx context.Context, rev state.Revision) (compute.CredentialCheck, error) {
	skip := func(reason string) (compute.CredentialCheck, error) {
		return compute.CredentialCheck{Outcome: state.CredentialSkipped, Reason: reason}, nil
	}
	if c.Credentials == nil || rev.HarnessAuth == nil || rev.HarnessAuth.Method != "api_key" {
		return skip("binding")
	}
	pm, ok, err := admission.Primary(rev.Document)
	if err != nil || !ok {
		return skip("model")
	}
	provider := pm.Ref.Provider
	if provider == "codex" && rev.Harness.ID == state.HarnessCodex {
		// Codex's built-in provider authenticates an api_key binding at the
		// OpenAI endpoint.
		provider = "openai"
	}
	creds, err := c.Credentials.Resolve(ctx, rev)
	if err != nil {
		return compute.CredentialCheck{}, err
	}
	var key string
	for _, f := range credentialFiles {
		if v := creds[f]; len(v) > 0 {
			key = string(v)
			break
		}
	}
	pc := upfront.ProviderConfig{Provider: provider, Key: key}
	override := c.ProviderBaseURLs[strings.ToUpper(provider)] != ""
	if pm.ProviderSet && !override {
		if pm.Provider.BaseURL != nil {
			pc.BaseURL = *pm.Provider.BaseURL
		}
		if pm.Provider.API != nil {
			pc.API = *pm.Provider.API
		}
		if len(pm.Provider.HeaderNames) > 0 {
			pc.Headers = map[string]string{}
			for _, h := range pm.Provider.HeaderNames {
				pc.Headers[h] = ""
			}
		}
	}
	res, err := upfront.Check(ctx, pc, upfront.Options{OpenAIBase: c.ProviderBaseURLs[contract.ProviderOpenAI],
		AnthropicBase: c.ProviderBaseURLs[contract.ProviderAnthropic], HTTPClient: c.HTTPClient, RejectForbidden: true})
	if err != nil {
		return compute.CredentialCheck{}, err
	}
	switch res.Outcome {
	case upfront.OutcomeRejected:
		d := map[string]string{"status": strconv.Itoa(res.Status), "providerCode": res.ProviderCode,
			"bodyShape": string(res.BodyShape)}
		for k, v := range map[string]string{"responseHeaderMarker": res.ResponseHeaderMarker,
			"providerErrorCode": res.ProviderErrorCode, "providerErrorType": res.ProviderErrorType} {
			if v != "" {
				d[k] = v
			}
		}
		return compute.CredentialCheck{Outcome: state.CredentialRejected, HeldCode: res.Code, Reason: strconv.Itoa(res.Status),
			Diagnostics: d}, nil
	case upfront.OutcomePassed:
		return compute.CredentialCheck{Outcome: state.CredentialPassed, Reason: strconv.Itoa(res.Status/100) + "xx"}, nil
	case upfront.OutcomeUnreachable:
		return skip("unreachable")
	}
	return skip(string(res.SkipReason))
}
