package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/apitest"
	"oce.dev/oce/coordinator/console"
	"oce.dev/oce/coordinator/state"
)

// BenchmarkNamespacePage1000Agents renders the Agents page of a Namespace
// holding 1,000 Agents (each with an admitted revision), through the
// console's in-process API client, and reports its p50/p99 beside the
// API's own overview answer for the same Namespace (the baseline).
func BenchmarkNamespacePage1000Agents(b *testing.B) {
	be := apitest.New()
	apiH := api.New(api.Config{Token: adminToken, Metrics: prometheus.NewRegistry()}, be)
	c, err := console.New(console.Config{API: apiH, Token: adminToken})
	require.NoError(b, err)
	h := console.Mount(apiH, c)
	_, err = be.Apply(state.CmdCreateNamespace, state.CreateNamespace{ID: "ns1", Name: "team"})
	require.NoError(b, err)
	_, err = be.Apply(state.CmdPutConfiguration, state.PutConfiguration{ID: "cfg1", NamespaceID: "ns1", Name: "cfg",
		Document: []byte(admission.ExampleEmbeddedAnthropic)})
	require.NoError(b, err)
	for i := range 1000 {
		id := fmt.Sprintf("agent-%04d", i)
		_, err := be.Apply(state.CmdCreateAgent, state.CreateAgent{ID: id, NamespaceID: "ns1", Name: id,
			ExecutionMode: state.ModeEmbedded, ConfigurationID: "cfg1"})
		require.NoError(b, err)
		_, err = be.Apply(state.CmdAdmitRevision, state.AdmitRevision{Revision: state.Revision{ID: "rev-" + id,
			AgentID: id, NamespaceID: "ns1", Document: []byte(`{}`), ConfigurationID: "cfg1", ConfigurationGeneration: 1,
			Harness: state.HarnessIdentity{ID: state.HarnessOpenClaw}, Mode: state.ModeEmbedded, Status: state.RevisionPending},
			WorkID: "work-" + id})
		require.NoError(b, err)
	}
	// log in once; the page request carries the session cookie
	srv := httptest.NewServer(h)
	defer srv.Close()
	f := &fixture{t: &testing.T{}, b: be, srv: srv}
	br := f.browser()
	lp := br.get("/console/login")
	m := csrfRE.FindStringSubmatch(lp.body)
	res := br.post("/console/login", url.Values{"csrf": {m[1]}, "token": {adminToken}})
	require.Equal(b, http.StatusSeeOther, res.status)
	u, _ := url.Parse(srv.URL)
	var cookie string
	for _, ck := range br.c.Jar.Cookies(&url.URL{Scheme: "http", Host: u.Host, Path: "/console/"}) {
		cookie = ck.Name + "=" + ck.Value
	}
	require.NotEmpty(b, cookie)

	measure := func(path string, auth bool) []time.Duration {
		var out []time.Duration
		for i := 0; i < b.N; i++ {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			if auth {
				req.Header.Set("Authorization", "Bearer "+adminToken)
			} else {
				req.Header.Set("Cookie", cookie)
			}
			rec := httptest.NewRecorder()
			start := time.Now()
			h.ServeHTTP(rec, req)
			out = append(out, time.Since(start))
			if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "agent-0999") {
				b.Fatalf("%s: %d", path, rec.Code)
			}
		}
		return out
	}
	b.ResetTimer()
	page := measure("/console/ns/team", false)
	b.StopTimer()
	base := measure("/v1/namespaces/team/overview", true)
	p := func(ds []time.Duration, q float64) float64 {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return float64(ds[int(q*float64(len(ds)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(p(page, 0.50), "ms-page-p50")
	b.ReportMetric(p(page, 0.99), "ms-page-p99")
	b.ReportMetric(p(base, 0.50), "ms-api-overview-p50")
	b.ReportMetric(p(page, 0.50)/p(base, 0.50), "x-page/api")
}
