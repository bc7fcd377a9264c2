package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/apitest"
	"oce.dev/oce/coordinator/state"
)

const testToken = "s3cret-token"

type env struct {
	t   *testing.T
	b   *apitest.Backend
	srv *httptest.Server
	reg *prometheus.Registry
}

func newEnv(t *testing.T, mut ...func(*api.Config)) *env {
	t.Helper()
	b := apitest.New()
	reg := prometheus.NewRegistry()
	cfg := api.Config{Token: testToken, Metrics: reg, MaxBodyBytes: 64 << 10, WithActor: apitest.WithActor}
	for _, m := range mut {
		m(&cfg)
	}
	srv := httptest.NewServer(api.New(cfg, b))
	t.Cleanup(srv.Close)
	return &env{t: t, b: b, srv: srv, reg: reg}
}

type resp struct {
	status int
	body   []byte
	header http.Header
}

func (r resp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body: %s", r.body)
	return m
}

// errCode returns the error envelope's code.
func (r resp) errCode(t *testing.T) string {
	t.Helper()
	m := r.json(t)
	e, ok := m["error"].(map[string]any)
	require.True(t, ok, "not an error envelope: %s", r.body)
	require.NotEmpty(t, e["message"])
	return e["code"].(string)
}

func (e *env) raw(method, path string, body io.Reader, token string) resp {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	require.NoError(e.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := e.srv.Client().Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	return resp{status: res.StatusCode, body: data, header: res.Header}
}

// do sends v (a string is sent verbatim, anything else as JSON).
func (e *env) do(method, path string, v any) resp {
	e.t.Helper()
	return e.send(method, path, v, nil)
}

// expect asserts status and returns the decoded body.
func (e *env) expect(status int, method, path string, v any) map[string]any {
	e.t.Helper()
	r := e.do(method, path, v)
	require.Equal(e.t, status, r.status, "%s %s: %s", method, path, r.body)
	if len(bytes.TrimSpace(r.body)) == 0 {
		return nil
	}
	return r.json(e.t)
}

// reject asserts a refused request with status and code that changes nothing.
func (e *env) reject(status int, code, method, path string, v any) map[string]any {
	e.t.Helper()
	before := e.b.M.Digest()
	r := e.do(method, path, v)
	require.Equal(e.t, status, r.status, "%s %s: %s", method, path, r.body)
	require.Equal(e.t, code, r.errCode(e.t), "%s %s: %s", method, path, r.body)
	require.Equal(e.t, before, e.b.M.Digest(), "a rejected request changed the state")
	return r.json(e.t)
}

// seed creates namespace "team", configuration "cfg" (embedded anthropic),
// credential source "anthropic" (key "key") and agent "bot" with an api_key
// binding naming it (in the spelling of earlier releases).
func (e *env) seed() (ns, cfg, agent map[string]any) {
	e.t.Helper()
	ns = e.expect(201, "POST", "/v1/namespaces", map[string]any{"name": "team"})
	e.expect(201, "POST", "/v1/namespaces/team/credentials", map[string]any{"name": "anthropic",
		"values": map[string]string{"key": "test-anthropic-value"}})
	cfg = e.expect(201, "POST", "/v1/namespaces/team/configurations",
		map[string]any{"name": "cfg", "document": json.RawMessage(admission.ExampleEmbeddedAnthropic)})
	agent = e.expect(201, "POST", "/v1/namespaces/team/agents", map[string]any{"name": "bot", "configuration": "cfg",
		"harnessAuth": map[string]any{"method": "api_key", "credentialKind": "secret", "sourceRef": "secret://team/anthropic#key"}})
	return ns, cfg, agent
}

func setInstallation(t *testing.T, b *apitest.Backend, inst state.Installation) {
	t.Helper()
	_, err := b.Apply(state.CmdSetInstallation, state.SetInstallation{Installation: inst})
	require.NoError(t, err)
}
