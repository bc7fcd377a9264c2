package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/apitest"
	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// fuzzHandler is an API over a backend holding namespace "team" and
// configuration "cfg".
func fuzzHandler(f *testing.F) (http.Handler, *apitest.Backend) {
	b := apitest.New()
	h := api.New(api.Config{Metrics: prometheus.NewRegistry(), MaxBodyBytes: 16 << 10}, b)
	if _, err := b.Apply(state.CmdCreateNamespace, state.CreateNamespace{ID: "ns1", Name: "team"}); err != nil {
		f.Fatal(err)
	}
	if _, err := b.Apply(state.CmdPutConfiguration, state.PutConfiguration{ID: "cfg1", NamespaceID: "ns1", Name: "cfg",
		Document: json.RawMessage(admission.ExampleEmbeddedAnthropic)}); err != nil {
		f.Fatal(err)
	}
	return h, b
}

// checkAnswer fails unless the answer is a success or a closed-set error
// envelope, and a refused request left the state unchanged but for its
// audit record (a reference into another Namespace is refused 403 and
// audited).
func checkAnswer(t *testing.T, rec *httptest.ResponseRecorder, before, after string, okStatus int) {
	if rec.Code == okStatus {
		return
	}
	var eb wire.ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil {
		t.Fatalf("status %d without an error envelope: %q", rec.Code, rec.Body.String())
	}
	want := map[codes.Code]int{codes.InvalidRequest: 0, codes.NotFound: 404, codes.ResourceConflict: 409, codes.Forbidden: 403}
	st, ok := want[eb.Error.Code]
	if !ok || (st != 0 && st != rec.Code) || (st == 0 && rec.Code != 400 && rec.Code != 413) {
		t.Fatalf("status %d code %q is outside the closed set", rec.Code, eb.Error.Code)
	}
	if before != after {
		t.Fatalf("a refused request (%d %s) changed the state", rec.Code, eb.Error.Code)
	}
}

func FuzzDecodeCreateAgent(f *testing.F) {
	h, b := fuzzHandler(f)
	for _, s := range []string{
		`{"name":"bot","configuration":"cfg"}`,
		`{"name":"bot","configuration":"cfg","executionMode":"dedicated","harnessAuth":{"method":"api_key","credentialKind":"secret","sourceRef":"secret://a/b#c"},"plugins":["@openclaw/codex"],"computeId":"memory"}`,
		`{"name":"bot","configuration":"cfg1","harnessAuth":{"method":"runtime"}}`,
		`{"name":"bot","configuration":"cfg","harnessAuth":{"method":"api_key","sourceRef":"credential:other/model#k"}}`,
		`{"name":"bot","configuration":"cfg","harnessAuth":{"method":"api_key","sourceRef":"local:../model"}}`,
		`{"name":"Bot","configuration":"cfg"}`, `{"name":"bot"}`, `[]`, `{}`, `{"harnessAuth":{"Method":"x"}}`,
		`{"name":"bot","configuration":"cfg"} {}`, `{"name":"bot","plugins":[1]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		before := b.M.DigestWithoutAudit()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/namespaces/team/agents", bytes.NewReader(body)))
		checkAnswer(t, rec, before, b.M.DigestWithoutAudit(), http.StatusCreated)
		if rec.Code == http.StatusCreated {
			var a state.Agent
			if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil || a.ID == "" {
				t.Fatalf("201 without an agent: %q", rec.Body.String())
			}
			if a.ExecutionMode != state.ModeEmbedded && a.ExecutionMode != state.ModeDedicated {
				t.Fatalf("created agent with mode %q", a.ExecutionMode)
			}
		}
	})
}

func FuzzDecodeCreateConfiguration(f *testing.F) {
	h, b := fuzzHandler(f)
	for _, s := range []string{
		`{"name":"c2","document":` + admission.ExampleEmbeddedOpenAI + `}`,
		`{"name":"c2","document":{}}`, `{"name":"c2","document":[]}`, `{"name":"c2","document":null}`,
		`{"name":"c2","document":{"agents":{"list":[]}}}`, `{"name":"c2"}`, `{"document":{}}`,
		`{"name":"c2","document":{"a":1},"x":2}`, `{"name":"c2","document":{"models":{"providers":{"p":{"baseUrl":"ftp://x"}}}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		before := b.M.DigestWithoutAudit()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/namespaces/team/configurations", bytes.NewReader(body)))
		checkAnswer(t, rec, before, b.M.DigestWithoutAudit(), http.StatusCreated)
	})
}

func FuzzDecodeUpdateAgent(f *testing.F) {
	h, b := fuzzHandler(f)
	if _, err := b.Apply(state.CmdCreateAgent, state.CreateAgent{ID: "a1", NamespaceID: "ns1", Name: "bot", ConfigurationID: "cfg1"}); err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{`{}`, `{"executionMode":"dedicated"}`, `{"configuration":"cfg"}`, `{"plugins":[]}`,
		`{"harnessAuth":{"method":"codex_pat","sourceRef":"secret://x"}}`, `{"computeId":""}`, `{"name":"x"}`,
		`{"harnessAuth":{"method":"api_key","sourceRef":"credential:team/model"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		before := b.M.DigestWithoutAudit()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("PATCH", "/v1/namespaces/team/agents/bot", bytes.NewReader(body)))
		checkAnswer(t, rec, before, b.M.DigestWithoutAudit(), http.StatusOK)
	})
}

// FuzzCreateCredential: any body is a created source or a closed-set
// refusal that changes nothing but the audit, and no answer ever carries a
// value it was given.
func FuzzCreateCredential(f *testing.F) {
	h, b := fuzzHandler(f)
	for _, s := range []string{`{"name":"model","values":{"value":"sk-fuzz-secret"}}`,
		`{"name":"pair","values":{"a":"sk-fuzz-a","b":"sk-fuzz-b"}}`, `{"name":"x","from":"memory:none"}`,
		`{"name":"x","values":{"../k":"sk-fuzz"}}`, `{"name":"X","values":{"value":"sk-fuzz"}}`, `{"name":"x","values":{}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		before := b.M.DigestWithoutAudit()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/namespaces/team/credentials", bytes.NewReader(body)))
		checkAnswer(t, rec, before, b.M.DigestWithoutAudit(), http.StatusCreated)
		var req wire.CreateCredentialSource
		if json.Unmarshal(body, &req) != nil {
			return
		}
		for _, v := range req.Values {
			if len(v) >= 6 && bytes.Contains(rec.Body.Bytes(), []byte(v)) {
				t.Fatalf("the answer (%d) carries a value it was given: %s", rec.Code, rec.Body)
			}
		}
		if rec.Code == http.StatusCreated { // withdraw it, so the next input may use the name
			if _, err := b.Apply(state.CmdWithdrawCredentialSource, state.WithdrawCredentialSource{ID: createdID(rec)}); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func createdID(rec *httptest.ResponseRecorder) string {
	var c wire.CredentialSource
	_ = json.Unmarshal(rec.Body.Bytes(), &c)
	return c.ID
}
