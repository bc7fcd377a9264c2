// Package upfront is the upfront 401 check OpenClaw's model probe runs
// before it spawns anything (docs/design/seed-001.md; docs/design/reference.md#s2-1): one POST with an
// empty `{}` body to the default OpenAI or Anthropic endpoint. Only HTTP 401
// fails, as AUTHENTICATION_FAILED with closed-set diagnostics; every other
// answer, and any transport failure, leaves the decision to the probe. A
// redirect is classified, never followed: following it would carry the
// credential to wherever the Location points.
package upfront

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"oce.dev/oce/shared/codes"
)

// Timeout bounds the whole request (docs/design/reference.md#s2-1: 8 s fetch timeout).
const Timeout = 8 * time.Second

// Default endpoints; tests inject the fake provider's URL instead.
const (
	DefaultOpenAIBase    = "https://api.openai.com"
	DefaultAnthropicBase = "https://api.anthropic.com"
)

// AnthropicVersion is the anthropic-version header the check sends.
const AnthropicVersion = "2023-06-01"

// 401 body limits: a body up to maxBody is classified whole (it must be
// valid JSON); the first maxScan bytes of a longer one are read token by
// token, keeping error.code and error.type wherever they appear in them.
const (
	maxBody = 64 << 10
	maxScan = 1 << 20
)

// Model APIs that choose the OpenAI path.
const (
	APIOpenAIResponses   = "openai-responses"
	APIOpenAICompletions = "openai-completions"
)

// ProviderConfig is what the check needs from the probed provider.
type ProviderConfig struct {
	// Provider is the native provider id; only openai and anthropic are checked.
	Provider string
	// Key is the credential. It is sent once and never logged.
	Key string
	// ModelAPI is the primary model's API: openai-responses (default,
	// POST /v1/responses) or openai-completions (POST /v1/chat/completions).
	ModelAPI string
	// BaseURL, API, Headers and HasRequestOptions describe provider
	// customization; any of them skips the check.
	BaseURL           string
	API               string
	Headers           map[string]string
	HasRequestOptions bool
}

// Options inject endpoints and the client (tests always inject the fake's URL).
type Options struct {
	OpenAIBase    string // default DefaultOpenAIBase
	AnthropicBase string // default DefaultAnthropicBase
	HTTPClient    *http.Client
	// Timeout overrides the 8 s request timeout (tests only).
	Timeout time.Duration
	// RejectForbidden also fails on HTTP 403, with the same diagnostics:
	// the coordinator's pre-cutover credential check (a provider that
	// forbids the key rejects the credential, docs/design/seed-001.md).
	RejectForbidden bool
}

// Outcome of a check.
type Outcome string

// Outcomes.
const (
	// OutcomeSkipped: the check did not apply (SkipReason says why).
	OutcomeSkipped Outcome = "skipped"
	// OutcomePassed: the endpoint answered something other than 401.
	OutcomePassed Outcome = "passed"
	// OutcomeUnreachable: no HTTP answer (transport error or timeout); not a failure.
	OutcomeUnreachable Outcome = "unreachable"
	// OutcomeRejected: HTTP 401; Code is AUTHENTICATION_FAILED.
	OutcomeRejected Outcome = "rejected"
	// OutcomeRedirected: the endpoint answered with a redirect (Status is
	// 301, 302, 303, 307 or 308); it was not followed and is not a failure.
	OutcomeRedirected Outcome = "redirected"
)

// SkipReason is a closed set of reasons the check did not run.
type SkipReason string

// Skip reasons.
const (
	SkipNotDefaultProvider SkipReason = "provider"
	SkipCustomBaseURL      SkipReason = "custom-base-url"
	SkipCustomAPI          SkipReason = "custom-api"
	SkipCustomHeaders      SkipReason = "custom-headers"
	SkipRequestOptions     SkipReason = "request-options"
	SkipOAuthToken         SkipReason = "oauth-token"
	SkipNoKey              SkipReason = "no-key"
	SkipModelAPI           SkipReason = "model-api"
)

// Result of the check. Every string field holds only closed-set values.
type Result struct {
	Outcome    Outcome    `json:"outcome"`
	SkipReason SkipReason `json:"skipReason,omitempty"`
	// Status is the HTTP status (0 when skipped or unreachable).
	Status int `json:"status,omitempty"`
	// Code is AUTHENTICATION_FAILED on 401, empty otherwise.
	Code codes.Code `json:"code,omitempty"`
	// 401 diagnostics (docs/design/seed-001.md); empty unless Outcome is rejected.
	// ProviderCode is openai or anthropic.
	ProviderCode string `json:"providerCode,omitempty"`
	// ResponseHeaderMarker lists the allow-listed response header names
	// present (sorted, comma-separated), then "other" when any other
	// non-generic header was present; "" when none. Never values.
	ResponseHeaderMarker string    `json:"responseHeaderMarker,omitempty"`
	BodyShape            BodyShape `json:"bodyShape,omitempty"`
	// ProviderErrorCode and ProviderErrorType are error.code and error.type
	// mapped into closed sets: "other" off-set, "" when missing.
	ProviderErrorCode string `json:"providerErrorCode,omitempty"`
	ProviderErrorType string `json:"providerErrorType,omitempty"`
}

// Failed reports whether the check failed the probe (HTTP 401 only).
func (r Result) Failed() bool { return r.Outcome == OutcomeRejected }

// Check runs the upfront 401 check. Its error is non-nil only when ctx ends
// (the caller is stopping); every provider answer is in the Result.
func Check(ctx context.Context, cfg ProviderConfig, o Options) (Result, error) {
	req, provider, skip := build(cfg, o)
	if skip != "" {
		return Result{Outcome: OutcomeSkipped, SkipReason: skip}, nil
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = Timeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(cctx, http.MethodPost, req.url, bytes.NewReader([]byte("{}")))
	if err != nil {
		return Result{Outcome: OutcomeUnreachable}, nil
	}
	hr.Header.Set("Content-Type", "application/json")
	for k, v := range req.header {
		hr.Header.Set(k, v)
	}
	client := http.Client{}
	if o.HTTPClient != nil {
		client = *o.HTTPClient
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, fmt.Errorf("upfront: %w", ctx.Err())
		}
		return Result{Outcome: OutcomeUnreachable}, nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized && !(o.RejectForbidden && resp.StatusCode == http.StatusForbidden) {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
		if redirect(resp.StatusCode) {
			return Result{Outcome: OutcomeRedirected, Status: resp.StatusCode}, nil
		}
		return Result{Outcome: OutcomePassed, Status: resp.StatusCode}, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil && ctx.Err() != nil {
		return Result{}, fmt.Errorf("upfront: %w", ctx.Err())
	}
	var d diagnosis
	if len(body) <= maxBody {
		d = diagnose(resp.Header, body)
	} else {
		d = diagnoseLong(resp.Header, io.MultiReader(bytes.NewReader(body), io.LimitReader(resp.Body, maxScan-int64(len(body)))))
	}
	return Result{Outcome: OutcomeRejected, Status: resp.StatusCode, Code: codes.AuthenticationFailed,
		ProviderCode: provider, ResponseHeaderMarker: d.marker, BodyShape: d.shape,
		ProviderErrorCode: d.code, ProviderErrorType: d.typ}, nil
}

// redirect reports the statuses an HTTP client would follow.
func redirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

type request struct {
	url    string
	header map[string]string
}

// build picks the endpoint, or the reason to skip.
func build(cfg ProviderConfig, o Options) (request, string, SkipReason) {
	switch {
	case cfg.Provider != "openai" && cfg.Provider != "anthropic":
		return request{}, "", SkipNotDefaultProvider
	case cfg.BaseURL != "":
		return request{}, "", SkipCustomBaseURL
	case cfg.API != "":
		return request{}, "", SkipCustomAPI
	case len(cfg.Headers) > 0:
		return request{}, "", SkipCustomHeaders
	case cfg.HasRequestOptions:
		return request{}, "", SkipRequestOptions
	case strings.TrimSpace(cfg.Key) == "":
		return request{}, "", SkipNoKey
	}
	if cfg.Provider == "anthropic" {
		if strings.HasPrefix(cfg.Key, "sk-ant-oat") {
			return request{}, "", SkipOAuthToken
		}
		base := o.AnthropicBase
		if base == "" {
			base = DefaultAnthropicBase
		}
		return request{url: strings.TrimRight(base, "/") + "/v1/messages",
			header: map[string]string{"x-api-key": cfg.Key, "anthropic-version": AnthropicVersion}}, "anthropic", ""
	}
	path := "/v1/responses"
	switch cfg.ModelAPI {
	case "", APIOpenAIResponses:
	case APIOpenAICompletions:
		path = "/v1/chat/completions"
	default:
		return request{}, "", SkipModelAPI
	}
	base := o.OpenAIBase
	if base == "" {
		base = DefaultOpenAIBase
	}
	return request{url: strings.TrimRight(base, "/") + path,
		header: map[string]string{"Authorization": "Bearer " + cfg.Key}}, "openai", ""
}
