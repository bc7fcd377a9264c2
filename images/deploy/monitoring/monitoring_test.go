// Package monitoring holds the Prometheus Operator objects and the Grafana
// dashboard for oce's coordinator (kubectl apply -k images/deploy/monitoring,
// only where the operator's CRDs exist; docs/OPERATIONS.md "Monitoring").
// Its tests check them against what a real coordinator exposes and run the
// pinned promtool (scripts/promtool.sh) over them: the rules check, rule unit
// tests for every alert (testdata), the dashboard's expressions, and the
// alerts a real 3-member cluster's scrapes raise when its leader and one
// more member are killed. No kube-apiserver, no Prometheus server.
package monitoring

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/certs"
	"oce.dev/oce/coordinator/client"
	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/coordinator/server"
	"oce.dev/oce/shared/codes"
)

// exposition is what a coordinator's /metrics answered.
type exposition struct {
	types  map[string]string          // family → type
	labels map[string]map[string]bool // family → its label names
	values map[string]map[string]bool // label name → values seen on any oce_ series
}

// exposed scrapes a coordinator (one Raft member over the in-memory driver)
// after one Agent serves and another's activation failed held, so every
// labelled family has a series, with a metrics-reader token as Prometheus
// would.
func exposed(t *testing.T) exposition {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "api.sock")
	d := memory.New(memory.DefaultCapabilities())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Config{DataDir: dir, RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
			APISocket: sock, Driver: d, Log: slog.New(slog.DiscardHandler)})
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	var cl *client.Client
	require.Eventually(t, func() bool {
		tok, err := os.ReadFile(filepath.Join(dir, server.TokenFileName))
		if err != nil {
			return false
		}
		ca, err := certs.LoadPool(filepath.Join(dir, certs.DevDir, certs.CAFile))
		if err != nil {
			return false
		}
		cl = client.New("unix://"+sock, strings.TrimSpace(string(tok)), client.WithCA(ca))
		return cl.Ready(t.Context()) == nil
	}, 20*time.Second, 20*time.Millisecond)

	c := t.Context()
	_, err := cl.CreateNamespace(c, "team")
	require.NoError(t, err)
	_, err = cl.CreateCredentialSource(c, "team", wire.CreateCredentialSource{Name: "anthropic",
		Values: map[string]string{"key": "test-anthropic-value"}})
	require.NoError(t, err)
	_, err = cl.CreateConfiguration(c, "team", "cfg", json.RawMessage(admission.ExampleEmbeddedAnthropic))
	require.NoError(t, err)
	state := func(agent string) func() bool {
		return func() bool {
			a, err := cl.Agent(c, "team", agent)
			return err == nil && a.Status != nil && a.Status.State != wire.AgentActivating
		}
	}
	deploy := func(agent, want string) {
		_, err := cl.CreateAgent(c, "team", wire.CreateAgent{Name: agent, Configuration: "cfg",
			HarnessAuth: &wire.HarnessAuth{Method: "api_key", CredentialKind: "secret", SourceRef: "secret://team/anthropic#key"}})
		require.NoError(t, err)
		_, err = cl.Deploy(c, "team", agent, wire.Deploy{})
		require.NoError(t, err)
		require.Eventually(t, state(agent), 20*time.Second, 20*time.Millisecond)
		a, err := cl.Agent(c, "team", agent)
		require.NoError(t, err)
		require.Equal(t, want, a.Status.State, "%s: %+v", agent, a.Status)
	}
	deploy("bot", wire.AgentServing)
	// The next revision prepared reports a held failure.
	d.SetHook(memory.OpPrepare, func(_ context.Context, rev string) error {
		d.Hold(rev, codes.AuthenticationFailed, nil)
		return nil
	})
	deploy("held", wire.AgentFailed)

	// The scrape identity of docs/OPERATIONS.md "Monitoring".
	_, err = cl.CreateUser(c, wire.CreateUser{Name: "prometheus"})
	require.NoError(t, err)
	_, err = cl.CreateRoleBinding(c, wire.CreateRoleBinding{Role: wire.RoleMetricsReader,
		Subject: wire.Subject{Kind: wire.PrincipalUser, Name: "prometheus"}})
	require.NoError(t, err)
	minted, err := cl.CreateToken(c, wire.CreateToken{User: "prometheus"})
	require.NoError(t, err)

	ca, err := certs.LoadPool(filepath.Join(dir, certs.DevDir, certs.CAFile))
	require.NoError(t, err)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}, TLSClientConfig: &tls.Config{RootCAs: ca, ServerName: "localhost"}}}
	req, err := http.NewRequestWithContext(c, http.MethodGet, "https://coordinator/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+minted.Token)
	res, err := hc.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))

	require.Contains(t, string(body), `oce_held_failures_total{code="AUTHENTICATION_FAILED"} 1`)
	require.Contains(t, string(body), `oce_agent_state{agent="bot",namespace="team",state="serving"} 1`)
	return parseExposition(t, string(body))
}

var sampleLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// parseExposition reads the text format: families from the TYPE lines, label
// names and values from the samples.
func parseExposition(t *testing.T, body string) exposition {
	t.Helper()
	x := exposition{types: map[string]string{}, labels: map[string]map[string]bool{}, values: map[string]map[string]bool{}}
	for _, line := range strings.Split(body, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			x.types[f[2]] = f[3]
			x.labels[f[2]] = map[string]bool{}
		}
	}
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "oce_") {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		fam := family(x, name)
		require.NotEmpty(t, fam, "a sample of no family: %s", line)
		for _, m := range sampleLabel.FindAllStringSubmatch(rest, -1) {
			x.labels[fam][m[1]] = true
			if x.values[m[1]] == nil {
				x.values[m[1]] = map[string]bool{}
			}
			x.values[m[1]][m[2]] = true
		}
	}
	return x
}

// family returns the family a series name belongs to ("" for none): the
// name itself, or a histogram's or summary's with its _bucket, _sum or
// _count suffix stripped.
func family(x exposition, name string) string {
	name, _, _ = strings.Cut(name, " ")
	if _, ok := x.types[name]; ok {
		return name
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suf); ok {
			if typ := x.types[base]; typ == "histogram" || (typ == "summary" && suf != "_bucket") {
				return base
			}
		}
	}
	return ""
}

// targetLabels are the labels Prometheus and the ServiceMonitor add to every
// series (honorLabels keeps a series' own namespace).
var targetLabels = map[string]bool{"job": true, "instance": true, "namespace": true, "pod": true, "service": true,
	"endpoint": true, "container": true, "le": true, "quantile": true}

var (
	metricRef = regexp.MustCompile(`\boce_[A-Za-z0-9_:]+`)
	selector  = regexp.MustCompile(`\b(oce_[A-Za-z0-9_:]+)\{([^}]*)\}`)
	matcher   = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	plainWord = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
)

// checkExpr checks what a PromQL expression reads (promtool checks that it
// parses: checkDashboardLoads, TestRulesPromtool): its brackets and quotes
// balance, every oce_
// name is a family (or its _bucket/_sum/_count series) the coordinator
// exposes, every label a selector matches on exists on the family or is a
// target label, and every plain value an equality or regex matcher names
// was seen on some series.
func checkExpr(t testingT, x exposition, where, expr string) {
	t.Helper()
	require.NotEmpty(t, strings.TrimSpace(expr), where)
	require.NoError(t, balanced(expr), "%s: %s", where, expr)
	for _, n := range metricRef.FindAllString(expr, -1) {
		fam := family(x, n)
		require.NotEmpty(t, fam, "%s: %s is no metric the coordinator exposes", where, n)
		require.False(t, fam == n && x.types[fam] == "histogram", "%s: %s is a histogram: its series are _bucket, _sum, _count", where, n)
	}
	for _, sel := range selector.FindAllStringSubmatch(expr, -1) {
		fam := family(x, sel[1])
		for _, m := range matcher.FindAllStringSubmatch(sel[2], -1) {
			label, op, value := m[1], m[2], m[3]
			require.True(t, x.labels[fam][label] || targetLabels[label], "%s: %s has no label %q", where, fam, label)
			if targetLabels[label] || strings.Contains(value, "$") || (op != "=" && op != "=~") {
				continue
			}
			for _, v := range strings.Split(value, "|") {
				if plainWord.MatchString(v) {
					require.True(t, x.values[label][v], "%s: no series has %s=%q", where, label, v)
				}
			}
		}
	}
}

// testingT is what checkExpr needs of a test (TestCheckExprRefuses passes
// a recorder).
type testingT interface {
	require.TestingT
	Helper()
}

// fakeT records a failure; FailNow unwinds the check.
type fakeT struct{ failed bool }

func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) FailNow()              { f.failed = true; panic(f) }
func (f *fakeT) Helper()               {}

// balanced reports unbalanced brackets or an unterminated string.
func balanced(expr string) error {
	var stack []rune
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	inString := false
	for i, r := range expr {
		switch {
		case inString:
			if r == '"' && (i == 0 || expr[i-1] != '\\') {
				inString = false
			}
		case r == '"':
			inString = true
		case r == '(' || r == '[' || r == '{':
			stack = append(stack, r)
		case pairs[r] != 0:
			if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
				return fmt.Errorf("unbalanced %q at %d", r, i)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if inString || len(stack) > 0 {
		return errors.New("unterminated string or bracket")
	}
	return nil
}

// Manifests, as far as this test reads them (strict: an unknown field is a
// typo the operator would reject or ignore).
type (
	kustomization struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Namespace  string            `json:"namespace"`
		Labels     []json.RawMessage `json:"labels"`
		Resources  []string          `json:"resources"`
		Generators []struct {
			Name    string          `json:"name"`
			Files   []string        `json:"files"`
			Options json.RawMessage `json:"options"`
		} `json:"configMapGenerator"`
	}
	meta struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	}
	secretKey struct {
		Name string `json:"name"`
		Key  string `json:"key"`
	}
	serviceMonitor struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   meta   `json:"metadata"`
		Spec       struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Endpoints []struct {
				Port          string `json:"port"`
				Scheme        string `json:"scheme"`
				Path          string `json:"path"`
				Interval      string `json:"interval"`
				ScrapeTimeout string `json:"scrapeTimeout"`
				HonorLabels   bool   `json:"honorLabels"`
				Authorization struct {
					Type        string    `json:"type"`
					Credentials secretKey `json:"credentials"`
				} `json:"authorization"`
				TLSConfig struct {
					ServerName string `json:"serverName"`
					CA         struct {
						Secret secretKey `json:"secret"`
					} `json:"ca"`
				} `json:"tlsConfig"`
				Relabelings []struct {
					SourceLabels []string `json:"sourceLabels"`
					Regex        string   `json:"regex"`
					Action       string   `json:"action"`
				} `json:"relabelings"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	prometheusRule struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   meta   `json:"metadata"`
		Spec       struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Alert       string            `json:"alert"`
					Expr        string            `json:"expr"`
					For         string            `json:"for"`
					Labels      map[string]string `json:"labels"`
					Annotations map[string]string `json:"annotations"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	service struct {
		Metadata meta `json:"metadata"`
		Spec     struct {
			ClusterIP string `json:"clusterIP"`
			Ports     []struct {
				Name string `json:"name"`
			} `json:"ports"`
		} `json:"spec"`
	}
)

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(b, v), path)
}

// bundleServices are the install bundle's Services by name.
func bundleServices(t *testing.T) map[string]service {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "services.yaml"))
	require.NoError(t, err)
	out := map[string]service{}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var s service
		require.NoError(t, yaml.Unmarshal([]byte(doc), &s))
		out[s.Metadata.Name] = s
	}
	require.Contains(t, out, apiService)
	return out
}

// apiService is the bundle's API Service; the certificate names it.
const apiService = "oce-coordinator-api"

var promDuration = regexp.MustCompile(`^[0-9]+(ms|s|m|h|d|w|y)$`)

func TestMonitoringBundle(t *testing.T) {
	x := exposed(t)

	t.Run("kustomization", func(t *testing.T) {
		var k kustomization
		readYAML(t, "kustomization.yaml", &k)
		require.Equal(t, "oce-system", k.Namespace)
		require.ElementsMatch(t, []string{"servicemonitor.yaml", "prometheusrule.yaml", "networkpolicy.yaml"}, k.Resources)
		files := k.Resources
		for _, g := range k.Generators {
			for _, f := range g.Files {
				_, src, _ := strings.Cut(f, "=")
				files = append(files, src)
			}
		}
		require.Contains(t, files, "grafana-dashboard.json")
		for _, f := range files {
			require.FileExists(t, f)
		}
		// The install bundle works without the operator's CRDs: it never
		// names this directory.
		var parent kustomization
		b, err := os.ReadFile(filepath.Join("..", "kustomization.yaml"))
		require.NoError(t, err)
		require.NoError(t, yaml.Unmarshal(b, &parent))
		require.NotEmpty(t, parent.Resources)
		for _, r := range parent.Resources {
			require.NotContains(t, r, "monitoring")
		}
	})

	t.Run("servicemonitor", func(t *testing.T) {
		var sm serviceMonitor
		readYAML(t, "servicemonitor.yaml", &sm)
		require.Equal(t, "monitoring.coreos.com/v1", sm.APIVersion)
		require.Equal(t, "ServiceMonitor", sm.Kind)
		svcs := bundleServices(t)
		api := svcs[apiService]
		for k, v := range sm.Spec.Selector.MatchLabels {
			require.Equal(t, v, api.Metadata.Labels[k], "the selector matches the API Service")
		}
		require.Len(t, sm.Spec.Endpoints, 1)
		ep := sm.Spec.Endpoints[0]
		require.True(t, slices.ContainsFunc(api.Spec.Ports, func(p struct {
			Name string `json:"name"`
		}) bool {
			return p.Name == ep.Port
		}), "port %q is a port of %s", ep.Port, apiService)
		require.Equal(t, "https", ep.Scheme)
		require.Equal(t, "/metrics", ep.Path)
		require.Regexp(t, promDuration, ep.Interval)
		require.True(t, ep.HonorLabels, "oce_agent_state's namespace is the oce Namespace")
		require.Equal(t, "Bearer", ep.Authorization.Type)
		require.Equal(t, secretKey{Name: "oce-metrics-token", Key: "token"}, ep.Authorization.Credentials)
		require.Equal(t, apiService, ep.TLSConfig.ServerName)
		require.Equal(t, secretKey{Name: "oce-coordinator-tls", Key: "ca.crt"}, ep.TLSConfig.CA.Secret)
		// Both bundle Services carry the selector's labels; the relabeling
		// keeps one target per member, the API Service's.
		kept := map[string]bool{}
		for name := range svcs {
			keep := true
			for _, r := range ep.Relabelings {
				if r.Action == "keep" && slices.Equal(r.SourceLabels, []string{"__meta_kubernetes_service_name"}) {
					keep = keep && regexp.MustCompile("^(?:"+r.Regex+")$").MatchString(name)
				}
			}
			kept[name] = keep
		}
		require.Equal(t, map[string]bool{apiService: true, "oce-coordinator": false}, kept)
		ops, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "OPERATIONS.md"))
		require.NoError(t, err)
		require.True(t, strings.Contains(string(ops), "secret generic oce-metrics-token"), "docs/OPERATIONS.md says how to make the Secret")
	})

	t.Run("prometheusrule", func(t *testing.T) {
		var pr prometheusRule
		readYAML(t, "prometheusrule.yaml", &pr)
		require.Equal(t, "monitoring.coreos.com/v1", pr.APIVersion)
		require.Equal(t, "PrometheusRule", pr.Kind)
		seen := map[string]bool{}
		used := map[string]bool{}
		for _, g := range pr.Spec.Groups {
			require.NotEmpty(t, g.Name)
			require.NotEmpty(t, g.Rules, g.Name)
			for _, r := range g.Rules {
				require.NotEmpty(t, r.Alert, "%s: every rule is an alert", g.Name)
				require.False(t, seen[r.Alert], "alert %s twice", r.Alert)
				seen[r.Alert] = true
				require.Contains(t, []string{"critical", "warning", "info"}, r.Labels["severity"], r.Alert)
				require.NotEmpty(t, r.Annotations["summary"], r.Alert)
				require.NotEmpty(t, r.Annotations["description"], r.Alert)
				require.Regexp(t, promDuration, r.For, r.Alert)
				checkExpr(t, x, r.Alert, r.Expr)
				for _, n := range metricRef.FindAllString(r.Expr, -1) {
					used[family(x, n)] = true
				}
			}
		}
		// The alerts issue 24 asks for, by the metric each one reads.
		for _, fam := range []string{"oce_raft_leader", "oce_work_lease_overdue_seconds", "oce_agents_held",
			"oce_agent_state", "oce_raft_applied_index", "oce_tls_certificate_expiry_timestamp_seconds"} {
			require.True(t, used[fam], "no alert reads %s", fam)
		}
	})

	t.Run("dashboard", func(t *testing.T) {
		b, err := os.ReadFile("grafana-dashboard.json")
		require.NoError(t, err)
		var d struct {
			Panels     []json.RawMessage `json:"panels"`
			Templating struct {
				List []struct {
					Name       string `json:"name"`
					Type       string `json:"type"`
					Definition string `json:"definition"`
				} `json:"list"`
			} `json:"templating"`
		}
		require.NoError(t, json.Unmarshal(b, &d))
		// It loads (dashboard_test.go says what that means); below, what it
		// reads is what the coordinator exposes.
		checkDashboardLoads(t.Context(), t, promtool(t), t.TempDir(), b)
		for _, v := range d.Templating.List {
			if v.Type == "query" {
				checkExpr(t, x, "variable "+v.Name, v.Definition)
			}
		}
		ids := map[int]string{}
		used := map[string]bool{}
		var walk func(raw []json.RawMessage)
		walk = func(raw []json.RawMessage) {
			for _, r := range raw {
				var p struct {
					ID      *int              `json:"id"`
					Type    string            `json:"type"`
					Title   string            `json:"title"`
					GridPos *json.RawMessage  `json:"gridPos"`
					Panels  []json.RawMessage `json:"panels"`
					Targets []struct {
						Expr  string `json:"expr"`
						RefID string `json:"refId"`
					} `json:"targets"`
				}
				require.NoError(t, json.Unmarshal(r, &p))
				require.NotNil(t, p.ID, "panel %q has an id", p.Title)
				require.NotEmpty(t, p.Title, "panel %d has a title", *p.ID)
				require.NotNil(t, p.GridPos, p.Title)
				prev, dup := ids[*p.ID]
				require.False(t, dup, "panels %q and %q share id %d", prev, p.Title, *p.ID)
				ids[*p.ID] = p.Title
				if p.Type != "row" {
					require.NotEmpty(t, p.Targets, p.Title)
				}
				refs := map[string]bool{}
				for _, tg := range p.Targets {
					require.False(t, refs[tg.RefID], "%s: refId %s twice", p.Title, tg.RefID)
					refs[tg.RefID] = true
					checkExpr(t, x, p.Title, tg.Expr)
					for _, n := range metricRef.FindAllString(tg.Expr, -1) {
						used[family(x, n)] = true
					}
				}
				walk(p.Panels)
			}
		}
		walk(d.Panels)
		// The panels issue 24 asks for.
		for _, fam := range []string{"oce_agents", "oce_work_items", "oce_work_oldest_queued_seconds",
			"oce_activation_duration_seconds", "oce_held_failures_total", "oce_raft_leader", "oce_raft_term",
			"oce_raft_commit_index", "oce_raft_applied_index", "oce_api_requests_total", "oce_api_request_seconds"} {
			require.True(t, used[fam], "no panel reads %s", fam)
		}
	})
}

// The checker itself refuses what it must (a synthetic exposition).
func TestCheckExprRefuses(t *testing.T) {
	x := parseExposition(t, `# TYPE oce_agents gauge
oce_agents{state="serving"} 1
# TYPE oce_api_request_seconds histogram
oce_api_request_seconds_bucket{route="GET /v1/status",le="+Inf"} 1
oce_api_request_seconds_sum{route="GET /v1/status"} 0.1
oce_api_request_seconds_count{route="GET /v1/status"} 1
`)
	for _, tc := range []struct {
		expr string
		ok   bool
	}{
		{`max by (state) (oce_agents{job="x"})`, true},
		{`histogram_quantile(0.9, sum by (le) (rate(oce_api_request_seconds_bucket[5m])))`, true},
		{`oce_agents{state=~"serving|$x"}`, true},
		{`oce_agent{state="serving"}`, false},              // no such family
		{`oce_agents_bucket`, false},                       // a gauge has no buckets
		{`oce_agents{stat="serving"}`, false},              // no such label
		{`oce_agents{state="servin"}`, false},              // no such value
		{`oce_agents{state=~"serving|stoped"}`, false},     // nor in a regex
		{`max(oce_agents{state="serving"}`, false},         // unbalanced
		{`oce_agents{state="serving}`, false},              // unterminated string
		{`rate(oce_api_request_seconds_count[5m)]`, false}, // crossed brackets
		{`   `, false}, // empty
		{`oce_api_request_seconds{route="GET /v1/status"}`, false}, // a histogram's own name selects nothing
	} {
		t.Run(tc.expr, func(t *testing.T) {
			ft := &fakeT{}
			func() {
				defer func() {
					if r := recover(); r != nil && r != ft {
						panic(r)
					}
				}()
				checkExpr(ft, x, "case", tc.expr)
			}()
			require.Equal(t, !tc.ok, ft.failed, tc.expr)
		})
	}
}
