package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/apitest"
	"oce.dev/oce/coordinator/authn"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
)

// BenchmarkDeploy measures one deploy request through the handler —
// authentication, authorization, decoding, lookup, admission, id minting and
// the AdmitRevision apply on an in-process machine (no Raft) — and reports
// deploys per second: with authorization off (every caller allowed), as the
// bootstrap identity, and as a deployer with a minted token (the Cedar
// decisions of the Namespace, the Agent, its ServicePrincipal and credential
// source, before and after admission).
func BenchmarkDeploy(b *testing.B) {
	for _, who := range []string{"authorization=off", "bootstrap", "deployer"} {
		b.Run(who, func(b *testing.B) {
			be := apitest.New()
			must := func(_ any, err error) {
				if err != nil {
					b.Fatal(err)
				}
			}
			must(be.Apply(state.CmdCreateNamespace, state.CreateNamespace{ID: "ns1", Name: "team"}))
			must(be.Apply(state.CmdPutConfiguration, state.PutConfiguration{ID: "cfg1", NamespaceID: "ns1", Name: "cfg",
				Document: json.RawMessage(admission.ExampleEmbeddedAnthropic)}))
			must(be.Apply(state.CmdCreateCredentialSource, state.CreateCredentialSource{ID: "k1", NamespaceID: "ns1", Name: "k", Keys: []string{"key"}}))
			must(be.Apply(state.CmdCreateAgent, state.CreateAgent{ID: "a1", NamespaceID: "ns1", Name: "bot", ConfigurationID: "cfg1",
				HarnessAuth:        &state.HarnessAuth{Method: "api_key", SourceRef: "secret://team/k#key"},
				ServicePrincipalID: "sp1", OwnServicePrincipal: true}))
			must(be.Apply(state.CmdCreateUser, state.CreateUser{ID: "u1", Name: "dan"}))
			must(be.Apply(state.CmdCreateRoleBinding, state.CreateRoleBinding{ID: "b1", Role: state.RoleDeployer,
				NamespaceID: "ns1", SubjectKind: state.PrincipalUser, Subject: "dan"}))
			tk, err := authn.Mint()
			if err != nil {
				b.Fatal(err)
			}
			must(be.Apply(state.CmdCreateToken, state.CreateToken{ID: tk.ID, PrincipalKind: state.PrincipalUser,
				PrincipalID: "u1", Hash: tk.Hash, ExpiresAt: time.Now().Add(time.Hour)}))
			cfg := api.Config{Token: "boot", Metrics: prometheus.NewRegistry(), WithActor: apitest.WithActor}
			bearer := "boot"
			switch who {
			case "authorization=off":
				cfg.IAM = allowAll{}
			case "deployer":
				bearer = tk.Token
			}
			h := api.New(cfg, be)
			start := time.Now()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rec := httptest.NewRecorder()
				req := httptest.NewRequest("POST", "/v1/namespaces/team/agents/bot/deploy", nil)
				req.Header.Set("Authorization", "Bearer "+bearer)
				h.ServeHTTP(rec, req)
				if rec.Code != 202 {
					b.Fatalf("deploy: %d %s", rec.Code, rec.Body)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "deploys/s")
		})
	}
}

// allowAll is an IAMDriver that allows everything (--authorization off).
type allowAll struct{}

func (allowAll) Authorize(context.Context, iam.Request) (iam.Decision, error) {
	return iam.Decision{Allowed: true}, nil
}

func (allowAll) ValidateRestriction(string) error { return nil }

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
