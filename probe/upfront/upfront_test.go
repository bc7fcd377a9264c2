package upfront

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/probe/fakeprovider"
	"oce.dev/oce/shared/codes"
)

const planted = "sk-PLANTED-secret-0123456789abcdef"

func fake(t *testing.T, o fakeprovider.Options) (*fakeprovider.Server, Options) {
	t.Helper()
	s, err := fakeprovider.Start(t.Context(), o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, Options{OpenAIBase: s.URL(), AnthropicBase: s.URL()}
}

func TestBodyShapes(t *testing.T) {
	s, o := fake(t, fakeprovider.Options{})
	cases := []struct {
		fault     fakeprovider.Fault
		shape     BodyShape
		code, typ string
	}{
		{fakeprovider.Fault401JSONErrorCode, ShapeJSONErrorCode, "invalid_api_key", "invalid_request_error"},
		{fakeprovider.Fault401JSONErrorNoCode, ShapeJSONErrorNoCode, "", "invalid_request_error"},
		{fakeprovider.Fault401JSONNoError, ShapeJSONNoError, "", ""},
		{fakeprovider.Fault401NonJSON, ShapeNonJSON, "", ""},
		{fakeprovider.Fault401Empty, ShapeEmpty, "", ""},
	}
	for _, c := range cases {
		for _, p := range []struct{ provider, api, path string }{
			{"openai", "", "/v1/responses"},
			{"openai", APIOpenAICompletions, "/v1/chat/completions"},
			{"anthropic", "", "/v1/messages"},
		} {
			t.Run(string(c.fault)+"/"+p.provider+p.api, func(t *testing.T) {
				s.SetFault(c.fault)
				before := s.RequestsTo(p.path)
				r, err := Check(t.Context(), ProviderConfig{Provider: p.provider, Key: planted, ModelAPI: p.api}, o)
				require.NoError(t, err)
				require.Equal(t, OutcomeRejected, r.Outcome)
				require.True(t, r.Failed())
				require.Equal(t, codes.AuthenticationFailed, r.Code)
				require.Equal(t, http.StatusUnauthorized, r.Status)
				require.Equal(t, p.provider, r.ProviderCode)
				require.Equal(t, c.shape, r.BodyShape)
				require.Equal(t, c.code, r.ProviderErrorCode)
				require.Equal(t, c.typ, r.ProviderErrorType)
				// The fake sends x-request-id (request-id for Anthropic) and X-Fake-Provider.
				want := "x-request-id,other"
				if p.provider == "anthropic" {
					want = "request-id,other"
				}
				require.Equal(t, want, r.ResponseHeaderMarker)
				require.Equal(t, before+1, s.RequestsTo(p.path))
				lr := s.LastRequest()
				require.True(t, lr.Upfront, "the body is the empty {}")
				if p.provider == "anthropic" {
					require.Equal(t, AnthropicVersion, lr.Header.Get("Anthropic-Version"))
					require.Contains(t, lr.HeaderNames, "X-Api-Key")
					require.NotContains(t, lr.HeaderNames, "Authorization")
				} else {
					require.Contains(t, lr.HeaderNames, "Authorization")
				}
			})
		}
	}
}

func TestBadKeyAgainstValidKeys(t *testing.T) {
	s, o := fake(t, fakeprovider.Options{ValidKeys: []string{"good"}})
	r, err := Check(t.Context(), ProviderConfig{Provider: "openai", Key: "good"}, o)
	require.NoError(t, err)
	require.Equal(t, Result{Outcome: OutcomePassed, Status: http.StatusBadRequest}, r, "a good key gets 400 for {}")
	r, err = Check(t.Context(), ProviderConfig{Provider: "openai", Key: planted}, o)
	require.NoError(t, err)
	require.True(t, r.Failed())
	require.EqualValues(t, 2, s.UpfrontRequests())
	require.EqualValues(t, 0, s.Requests(), "the upfront check is not a model request")
}

func TestNon401DoesNotFail(t *testing.T) {
	s, o := fake(t, fakeprovider.Options{})
	for _, f := range []fakeprovider.Fault{fakeprovider.Fault403, fakeprovider.Fault429, fakeprovider.Fault500} {
		s.SetFault(f)
		r, err := Check(t.Context(), ProviderConfig{Provider: "openai", Key: planted}, o)
		require.NoError(t, err)
		require.Equal(t, OutcomePassed, r.Outcome, f)
		require.False(t, r.Failed())
		require.Empty(t, r.Code)
		require.Empty(t, r.BodyShape, "no diagnostics outside 401")
	}
}

func TestUnreachableAndTimeout(t *testing.T) {
	// A closed port: no HTTP answer is not a failure.
	s, o := fake(t, fakeprovider.Options{})
	require.NoError(t, s.Close())
	r, err := Check(t.Context(), ProviderConfig{Provider: "openai", Key: planted}, o)
	require.NoError(t, err)
	require.Equal(t, OutcomeUnreachable, r.Outcome)

	// A server that never answers hits the (injected) timeout.
	block := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(block)
	r, err = Check(t.Context(), ProviderConfig{Provider: "openai", Key: planted},
		Options{OpenAIBase: hang.URL, Timeout: 100 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, OutcomeUnreachable, r.Outcome)

	// A cancelled caller gets its context error.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = Check(ctx, ProviderConfig{Provider: "openai", Key: planted}, Options{OpenAIBase: hang.URL})
	require.ErrorIs(t, err, context.Canceled)
}

func TestSkips(t *testing.T) {
	s, o := fake(t, fakeprovider.Options{Fault: fakeprovider.Fault401JSONErrorCode})
	cases := []struct {
		cfg  ProviderConfig
		want SkipReason
	}{
		{ProviderConfig{Provider: "anthropic", Key: "sk-ant-oat01-" + planted}, SkipOAuthToken},
		{ProviderConfig{Provider: "openai", Key: planted, BaseURL: s.URL() + "/v1"}, SkipCustomBaseURL},
		{ProviderConfig{Provider: "anthropic", Key: planted, BaseURL: "https://proxy.example"}, SkipCustomBaseURL},
		{ProviderConfig{Provider: "openai", Key: planted, API: "openai-completions"}, SkipCustomAPI},
		{ProviderConfig{Provider: "openai", Key: planted, Headers: map[string]string{"x": "y"}}, SkipCustomHeaders},
		{ProviderConfig{Provider: "openai", Key: planted, HasRequestOptions: true}, SkipRequestOptions},
		{ProviderConfig{Provider: "openai-compatible", Key: planted}, SkipNotDefaultProvider},
		{ProviderConfig{Provider: "codex", Key: planted}, SkipNotDefaultProvider},
		{ProviderConfig{Provider: "openai", Key: " "}, SkipNoKey},
		{ProviderConfig{Provider: "openai", Key: planted, ModelAPI: "anthropic-messages"}, SkipModelAPI},
	}
	for _, c := range cases {
		r, err := Check(t.Context(), c.cfg, o)
		require.NoError(t, err)
		require.Equal(t, Result{Outcome: OutcomeSkipped, SkipReason: c.want}, r)
	}
	require.EqualValues(t, 0, s.UpfrontRequests()+s.Requests(), "a skipped check sends nothing")
}

func TestDiagnoseClosedSets(t *testing.T) {
	cases := []struct {
		body      string
		shape     BodyShape
		code, typ string
	}{
		{`{"error":{"code":"weird_new_code","type":"brand_new_type"}}`, ShapeJSONErrorCode, "other", "other"},
		{`{"error":{"code":401,"type":"authentication_error"}}`, ShapeJSONErrorCode, "other", "authentication_error"},
		{`{"error":{"code":null,"type":null}}`, ShapeJSONErrorNoCode, "", ""},
		{`{"error":"Unauthorized"}`, ShapeJSONErrorNoCode, "", ""},
		{`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, ShapeJSONErrorNoCode, "", "authentication_error"},
		{`[1,2]`, ShapeJSONNoError, "", ""},
		{`  `, ShapeEmpty, "", ""},
		{`Unauthorized`, ShapeNonJSON, "", ""},
	}
	for _, c := range cases {
		d := diagnose(http.Header{}, []byte(c.body))
		require.Equal(t, c.shape, d.shape, c.body)
		require.Equal(t, c.code, d.code, c.body)
		require.Equal(t, c.typ, d.typ, c.body)
	}
	h := http.Header{}
	for _, k := range []string{"Date", "Content-Type", "Www-Authenticate", "Cf-Ray", "X-Secret-Thing", "Openai-Organization"} {
		h.Set(k, "value-"+planted)
	}
	require.Equal(t, "cf-ray,openai-organization,www-authenticate,other", headerMarker(h))
	require.Equal(t, "", headerMarker(http.Header{"Date": {"x"}}))
}

func TestNoSecretInLogs(t *testing.T) {
	_, o := fake(t, fakeprovider.Options{Fault: fakeprovider.Fault401JSONErrorCode})
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, nil))
	r, err := Check(t.Context(), ProviderConfig{Provider: "openai", Key: planted}, o)
	require.NoError(t, err)
	Log(t.Context(), l, r)
	out := buf.String()
	require.NotContains(t, out, planted)
	require.NotContains(t, out, "Incorrect API key", "no provider body text")
	require.NotContains(t, out, "req_fake", "no header values")
	require.NotContains(t, out, "127.0.0.1", "no endpoint")
	var rec map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &rec))
	require.Equal(t, LogEvent, rec["msg"])
	require.Equal(t, "ERROR", rec["level"])
	require.Equal(t, "AUTHENTICATION_FAILED", rec["code"])
	require.Equal(t, "json-error-code", rec["bodyShape"])
	require.Equal(t, "invalid_api_key", rec["providerErrorCode"])
	require.Equal(t, "invalid_request_error", rec["providerErrorType"])
	require.Equal(t, "openai", rec["providerCode"])
	require.Equal(t, "x-request-id,other", rec["responseHeaderMarker"])
	allowed := map[string]bool{"time": true, "level": true, "msg": true, "outcome": true, "status": true,
		"code": true, "providerCode": true, "responseHeaderMarker": true, "bodyShape": true,
		"providerErrorCode": true, "providerErrorType": true, "skipReason": true}
	for k := range rec {
		require.True(t, allowed[k], "unexpected log field %q", k)
	}
}

func FuzzDiagnose(f *testing.F) {
	f.Add([]byte(`{"error":{"code":"invalid_api_key","type":"invalid_request_error"}}`))
	f.Add([]byte(`{"detail":"x"}`))
	f.Add([]byte(`<html>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		d := diagnose(http.Header{}, body)
		require.Contains(t, []BodyShape{ShapeJSONErrorCode, ShapeJSONErrorNoCode, ShapeJSONNoError, ShapeNonJSON, ShapeEmpty}, d.shape)
		require.True(t, d.code == "" || d.code == "other" || errorCodes[d.code])
		require.True(t, d.typ == "" || d.typ == "other" || errorTypes[d.typ])
	})
}

// A redirect is classified, never followed: the credential stays with the
// endpoint it was meant for, also with a caller's client that would follow.
func TestRedirectNotFollowed(t *testing.T) {
	var elsewhere atomic.Int64
	var leaked atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		if r.Header.Get("Authorization") != "" || r.Header.Get("X-Api-Key") != "" {
			leaked.Store(true)
		}
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer other.Close()
	var status atomic.Int64
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, int(status.Load()))
	}))
	defer first.Close()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		for _, provider := range []string{"openai", "anthropic"} {
			for _, client := range []*http.Client{nil, {}, {Timeout: time.Minute}} {
				status.Store(int64(code))
				r, err := Check(t.Context(), ProviderConfig{Provider: provider, Key: planted},
					Options{OpenAIBase: first.URL, AnthropicBase: first.URL, HTTPClient: client})
				require.NoError(t, err)
				require.Equal(t, Result{Outcome: OutcomeRedirected, Status: code}, r)
				require.False(t, r.Failed())
			}
		}
	}
	require.Zero(t, elsewhere.Load(), "a redirect was followed")
	require.False(t, leaked.Load())

	var buf bytes.Buffer
	Log(t.Context(), slog.New(slog.NewJSONHandler(&buf, nil)), Result{Outcome: OutcomeRedirected, Status: 307})
	require.Contains(t, buf.String(), `"outcome":"redirected"`)
	require.NotContains(t, buf.String(), other.URL)
}

// A 401 body longer than the whole-body limit keeps error.code and
// error.type wherever they appear in its first maxScan bytes.
func TestLarge401Bodies(t *testing.T) {
	pad := strings.Repeat("x", 200<<10)
	cases := []struct {
		name      string
		body      string
		shape     BodyShape
		code, typ string
	}{
		{"openai layout, huge message first",
			`{"error":{"message":"` + pad + `","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			ShapeJSONErrorCode, "invalid_api_key", "invalid_request_error"},
		{"error first, huge trailer", `{"error":{"code":"invalid_api_key","type":"authentication_error"},"trace":"` + pad + `"}`,
			ShapeJSONErrorCode, "invalid_api_key", "authentication_error"},
		{"anthropic layout, huge padding before", `{"type":"error","padding":["` + pad + `",{"a":[1,2,{"b":null}]}],"error":{"type":"authentication_error","message":"m"}}`,
			ShapeJSONErrorNoCode, "", "authentication_error"},
		{"code off the set, number type", `{"error":{"code":"brand_new","type":7,"message":"` + pad + `"}}`,
			ShapeJSONErrorCode, "other", "other"},
		{"numeric code", `{"error":{"code":401,"message":"` + pad + `"}}`, ShapeJSONErrorCode, "other", ""},
		{"composite code", `{"error":{"code":{"x":1},"type":["y"],"message":"` + pad + `"}}`, ShapeJSONErrorNoCode, "other", "other"},
		{"error is a string", `{"error":"` + pad + `"}`, ShapeJSONErrorNoCode, "", ""},
		{"error is null", `{"error":null,"detail":"` + pad + `"}`, ShapeJSONNoError, "", ""},
		{"no error member", `{"detail":"` + pad + `"}`, ShapeJSONNoError, "", ""},
		{"array", `["` + pad + `"]`, ShapeJSONNoError, "", ""},
		{"html", `<html>` + pad, ShapeNonJSON, "", ""},
		{"whitespace", strings.Repeat(" ", 100<<10), ShapeEmpty, "", ""},
		{"error beyond the scan", `{"padding":"` + strings.Repeat("x", maxScan) + `","error":{"code":"invalid_api_key"}}`,
			ShapeJSONNoError, "", ""},
		{"cut inside the error", `{"error":{"type":"invalid_request_error","message":"` + strings.Repeat("x", maxScan) + `","code":"invalid_api_key"}}`,
			ShapeJSONErrorNoCode, "", "invalid_request_error"},
	}
	var body atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, body.Load().(string))
	}))
	defer srv.Close()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Greater(t, len(c.body), maxBody)
			body.Store(c.body)
			r, err := Check(t.Context(), ProviderConfig{Provider: "openai", Key: planted}, Options{OpenAIBase: srv.URL})
			require.NoError(t, err)
			require.Equal(t, OutcomeRejected, r.Outcome)
			require.Equal(t, c.shape, r.BodyShape)
			require.Equal(t, c.code, r.ProviderErrorCode)
			require.Equal(t, c.typ, r.ProviderErrorType)
		})
	}
}

// The token scanner agrees with the whole-body classification on every
// body both can read.
func FuzzScanAgreesWithWholeBody(f *testing.F) {
	f.Add([]byte(`{"error":{"code":"invalid_api_key","type":"invalid_request_error"}}`))
	f.Add([]byte(`{"error":{"code":"","type":null},"error":{"code":3}}`))
	f.Add([]byte(`{"error":[1],"x":{"error":{"code":"a"}}}`))
	f.Add([]byte(`{"error":{"code":{"a":[]},"type":"tokens"}}`))
	f.Add([]byte(`"str"`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var v any
		if json.Unmarshal(body, &v) != nil {
			return
		}
		whole := diagnose(http.Header{}, body)
		long := diagnoseLong(http.Header{}, bytes.NewReader(body))
		require.Equal(t, whole, long, "%q", body)
	})
}
