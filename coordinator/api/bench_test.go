package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/apitest"
	"oce.dev/oce/coordinator/state"
)

// BenchmarkDeploy measures one deploy request through the handler —
// decoding, lookup, admission, id minting and the AdmitRevision apply on an
// in-process machine (no Raft) — and reports deploys per second.
func BenchmarkDeploy(b *testing.B) {
	be := apitest.New()
	h := api.New(api.Config{Metrics: prometheus.NewRegistry()}, be)
	must := func(_ any, err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(be.Apply(state.CmdCreateNamespace, state.CreateNamespace{ID: "ns1", Name: "team"}))
	must(be.Apply(state.CmdPutConfiguration, state.PutConfiguration{ID: "cfg1", NamespaceID: "ns1", Name: "cfg",
		Document: json.RawMessage(admission.ExampleEmbeddedAnthropic)}))
	must(be.Apply(state.CmdCreateAgent, state.CreateAgent{ID: "a1", NamespaceID: "ns1", Name: "bot", ConfigurationID: "cfg1",
		HarnessAuth: &state.HarnessAuth{Method: "api_key", SourceRef: "secret://team/k#key"}}))
	start := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/namespaces/team/agents/bot/deploy", nil))
		if rec.Code != 202 {
			b.Fatalf("deploy: %d %s", rec.Code, rec.Body)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "deploys/s")
}

// BenchmarkCreateAgent measures agent creation (strict decoding and
// validation included) as the number of Agents in the Namespace grows.
func BenchmarkCreateAgent(b *testing.B) {
	be := apitest.New()
	h := api.New(api.Config{Metrics: prometheus.NewRegistry()}, be)
	if _, err := be.Apply(state.CmdCreateNamespace, state.CreateNamespace{ID: "ns1", Name: "team"}); err != nil {
		b.Fatal(err)
	}
	if _, err := be.Apply(state.CmdPutConfiguration, state.PutConfiguration{ID: "cfg1", NamespaceID: "ns1", Name: "cfg",
		Document: json.RawMessage(admission.ExampleEmbeddedAnthropic)}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		body := fmt.Sprintf(`{"name":"bot-%d","configuration":"cfg","harnessAuth":{"method":"api_key","sourceRef":"secret://team/k#key"}}`, i)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/namespaces/team/agents", bytes.NewBufferString(body)))
		if rec.Code != 201 {
			b.Fatalf("create: %d %s", rec.Code, rec.Body)
		}
	}
}
