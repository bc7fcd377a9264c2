package api_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

var m0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// stateFx drives an API's state machine with entries stamped at chosen
// times (as the leader would stamp them) and scrapes /metrics at a chosen
// time.
type stateFx struct {
	e   *env
	now time.Time
}

func newStateFx(t *testing.T) *stateFx {
	f := &stateFx{}
	f.e = newEnv(t, func(c *api.Config) { c.Clock = func() time.Time { return f.now } })
	f.apply(0, state.CmdCreateNamespace, state.CreateNamespace{ID: "ns1", Name: "team"})
	f.apply(0, state.CmdPutConfiguration, state.PutConfiguration{ID: "c1", NamespaceID: "ns1", Name: "cfg",
		Document: json.RawMessage(`{"a":1}`)})
	for _, a := range []string{"bot", "helper"} {
		f.apply(0, state.CmdCreateAgent, state.CreateAgent{ID: "id-" + a, NamespaceID: "ns1", Name: a, ConfigurationID: "c1"})
	}
	return f
}

// apply applies one command stamped at m0 + sec seconds.
func (f *stateFx) apply(sec int, typ state.Named, p any) any {
	f.e.t.Helper()
	b, err := state.Encode(typ.Name(), m0.Add(time.Duration(sec)*time.Second), "user:dan", p)
	require.NoError(f.e.t, err)
	res, err := f.e.b.M.ApplyBytes(b)
	require.NoError(f.e.t, err, typ.Name())
	return res
}

// admit admits revision rev of agent (id-<agent>) with its work w-<rev>.
func (f *stateFx) admit(sec int, agent, rev string) {
	f.apply(sec, state.CmdAdmitRevision, state.AdmitRevision{WorkID: "w-" + rev, MaxAttempts: 3, Revision: state.Revision{
		ID: rev, AgentID: "id-" + agent, NamespaceID: "ns1", Document: json.RawMessage(`{"a":1}`), ConfigurationID: "c1",
		ConfigurationGeneration: 1, Harness: state.HarnessIdentity{ID: state.HarnessOpenClaw, Version: "2026.9.6"},
		Mode: state.ModeEmbedded, ComputeID: "memory"}})
}

// claim claims w-<rev> with a 5 s lease.
func (f *stateFx) claim(sec int, rev string) { f.claimFor(sec, 5, rev) }

func (f *stateFx) claimFor(sec, lease int, rev string) {
	f.apply(sec, state.CmdClaimWork, state.ClaimWork{WorkID: "w-" + rev, Owner: "o",
		LeaseExpiry: m0.Add(time.Duration(sec+lease) * time.Second)})
}

func ref(rev string) state.ClaimRef { return state.ClaimRef{WorkID: "w-" + rev, Owner: "o"} }

// activate admits, claims, commits and completes rev: admitted at sec,
// completed at sec+took.
func (f *stateFx) activate(sec, took int, agent, rev, prev string) {
	f.admit(sec, agent, rev)
	f.claimFor(sec, took+5, rev)
	f.apply(sec+took, state.CmdActivateRevision, state.ActivateRevision{ClaimRef: ref(rev), Expected: prev})
	var retired []string
	if prev != "" {
		retired = []string{prev}
	}
	f.apply(sec+took, state.CmdCompleteActivation, state.CompleteActivation{ClaimRef: ref(rev), Retired: retired})
}

// scrape reads /metrics at m0 + sec seconds and returns the samples of the
// named families (histograms with their _bucket, _sum and _count).
func (f *stateFx) scrape(sec int, families ...string) map[string]string {
	f.e.t.Helper()
	f.now = m0.Add(time.Duration(sec) * time.Second)
	r := f.e.raw("GET", "/metrics", nil, testToken)
	require.Equal(f.e.t, 200, r.status, string(r.body))
	return samples(f.e.t, r.body, families...)
}

// samples parses the text exposition: "name{labels}" → value, for the
// series of the named families.
func samples(t *testing.T, body []byte, families ...string) map[string]string {
	t.Helper()
	want := map[string]bool{}
	for _, f := range families {
		for _, s := range []string{"", "_bucket", "_sum", "_count"} {
			want[f+s] = true
		}
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		require.Positive(t, i, line)
		series, value := line[:i], line[i+1:]
		name, _, _ := strings.Cut(series, "{")
		if want[name] {
			out[series] = value
		}
	}
	return out
}

// histogramOf is the exposition of oce_activation_duration_seconds after
// the observations obs.
func histogramOf(obs ...float64) map[string]string {
	bounds := []float64{1, 2.5, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200}
	out := map[string]string{}
	sum := 0.0
	for _, o := range obs {
		sum += o
	}
	for _, b := range bounds {
		n := 0
		for _, o := range obs {
			if o <= b {
				n++
			}
		}
		out[`oce_activation_duration_seconds_bucket{le="`+strconv.FormatFloat(b, 'g', -1, 64)+`"}`] = strconv.Itoa(n)
	}
	out[`oce_activation_duration_seconds_bucket{le="+Inf"}`] = strconv.Itoa(len(obs))
	out["oce_activation_duration_seconds_sum"] = strconv.FormatFloat(sum, 'g', -1, 64)
	out["oce_activation_duration_seconds_count"] = strconv.Itoa(len(obs))
	return out
}

// agents is the exposition of oce_agents with every state 0 but those named.
func agents(n map[string]int) map[string]string {
	out := map[string]string{}
	for _, st := range []string{"serving", "activating", "degraded", "failed", "stopped", "deleting"} {
		out[`oce_agents{state="`+st+`"}`] = strconv.Itoa(n[st])
	}
	return out
}

// ages is the exposition of one work-age family with every kind 0 but those
// named.
func ages(family string, secs map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range []string{"activate", "stop", "delete"} {
		v := secs[k]
		if v == "" {
			v = "0"
		}
		out[family+`{kind="`+k+`"}`] = v
	}
	return out
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func agentState(agent, st string) map[string]string {
	return map[string]string{`oce_agent_state{agent="` + agent + `",namespace="team",state="` + st + `"}`: "1"}
}

var stateFamilies = []string{"oce_agents", "oce_agent_state", "oce_agents_held", "oce_work_oldest_queued_seconds",
	"oce_work_lease_overdue_seconds", "oce_activation_duration_seconds", "oce_held_failures_total", "oce_activations_total"}

func TestStateMetrics(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drive func(f *stateFx)
		at    int // scrape time, seconds after m0
		want  map[string]string
	}{
		{name: "two stopped Agents, nothing queued", drive: func(*stateFx) {}, at: 100,
			want: merge(agents(map[string]int{"stopped": 2}), agentState("bot", "stopped"), agentState("helper", "stopped"),
				map[string]string{"oce_agents_held": "0", "oce_activations_total": "0"},
				ages("oce_work_oldest_queued_seconds", nil), ages("oce_work_lease_overdue_seconds", nil), histogramOf())},
		{name: "queued deploys: the oldest one's age", at: 52,
			drive: func(f *stateFx) { f.admit(10, "bot", "r1"); f.admit(30, "helper", "r2") },
			want: merge(agents(map[string]int{"activating": 2}), agentState("bot", "activating"), agentState("helper", "activating"),
				map[string]string{"oce_agents_held": "0", "oce_activations_total": "0"},
				ages("oce_work_oldest_queued_seconds", map[string]string{"activate": "42"}),
				ages("oce_work_lease_overdue_seconds", nil), histogramOf())},
		{name: "a claim whose lease lapsed", at: 40,
			drive: func(f *stateFx) { f.admit(10, "bot", "r1"); f.claim(20, "r1") }, // lease until 25
			want: merge(agents(map[string]int{"activating": 1, "stopped": 1}), agentState("bot", "activating"),
				agentState("helper", "stopped"), map[string]string{"oce_agents_held": "0", "oce_activations_total": "0"},
				ages("oce_work_oldest_queued_seconds", nil),
				ages("oce_work_lease_overdue_seconds", map[string]string{"activate": "15"}), histogramOf())},
		{name: "a live claim is not overdue", at: 24,
			drive: func(f *stateFx) { f.admit(10, "bot", "r1"); f.claim(20, "r1") },
			want: merge(agents(map[string]int{"activating": 1, "stopped": 1}), agentState("bot", "activating"),
				agentState("helper", "stopped"), map[string]string{"oce_agents_held": "0", "oce_activations_total": "0"},
				ages("oce_work_oldest_queued_seconds", nil), ages("oce_work_lease_overdue_seconds", nil), histogramOf())},
		{name: "activations: serving, and their durations", at: 200,
			drive: func(f *stateFx) {
				f.activate(10, 7, "bot", "r1", "")
				f.apply(20, state.CmdObserveAgent, state.ObserveAgent{AgentID: "id-bot", RevisionID: "r1", Ready: true})
				f.activate(30, 95, "bot", "r2", "r1") // a redeploy, 95 s
				f.apply(130, state.CmdObserveAgent, state.ObserveAgent{AgentID: "id-bot", RevisionID: "r2", Ready: true})
			},
			want: merge(agents(map[string]int{"serving": 1, "stopped": 1}), agentState("bot", "serving"),
				agentState("helper", "stopped"), map[string]string{"oce_agents_held": "0", "oce_activations_total": "2"},
				ages("oce_work_oldest_queued_seconds", nil), ages("oce_work_lease_overdue_seconds", nil), histogramOf(7, 95))},
		{name: "held failures by held code; other failures not counted", at: 100,
			drive: func(f *stateFx) {
				f.admit(10, "bot", "r1")
				f.claim(11, "r1")
				f.apply(12, state.CmdRecordRevisionRuntime, state.RecordRevisionRuntime{ClaimRef: ref("r1"),
					Reason: "held", HeldCode: string(codes.AuthenticationFailed)})
				f.apply(13, state.CmdFailWork, state.FailWork{ClaimRef: ref("r1"), Code: string(codes.RevisionAuthenticationFailed)})
				f.admit(20, "helper", "r2")
				f.claim(21, "r2")
				f.apply(22, state.CmdFailWork, state.FailWork{ClaimRef: ref("r2"), Code: string(codes.RevisionNotReady)})
			},
			want: merge(agents(map[string]int{"failed": 2}), agentState("bot", "failed"), agentState("helper", "failed"),
				map[string]string{"oce_agents_held": "0", "oce_activations_total": "0",
					`oce_held_failures_total{code="AUTHENTICATION_FAILED"}`: "1"},
				ages("oce_work_oldest_queued_seconds", nil), ages("oce_work_lease_overdue_seconds", nil), histogramOf())},
		{name: "a serving Agent observed held is degraded and held", at: 100,
			drive: func(f *stateFx) {
				f.activate(10, 3, "bot", "r1", "")
				f.apply(20, state.CmdObserveAgent, state.ObserveAgent{AgentID: "id-bot", RevisionID: "r1", Ready: true})
				f.apply(30, state.CmdObserveAgent, state.ObserveAgent{AgentID: "id-bot", RevisionID: "r1",
					Reason: "held", HeldCode: string(codes.ModelProbeFailed)})
				f.activate(40, 2, "helper", "r2", "")
				f.apply(50, state.CmdObserveAgent, state.ObserveAgent{AgentID: "id-helper", RevisionID: "r2", Reason: "probe"})
				f.apply(51, state.CmdObserveAgent, state.ObserveAgent{AgentID: "id-helper", RevisionID: "r2", Ready: true})
				f.apply(52, state.CmdObserveAgent, state.ObserveAgent{AgentID: "id-helper", RevisionID: "r2", Reason: "disconnected"})
			},
			want: merge(agents(map[string]int{"degraded": 2}), agentState("bot", "degraded"), agentState("helper", "degraded"),
				map[string]string{"oce_agents_held": "1", "oce_activations_total": "2"},
				ages("oce_work_oldest_queued_seconds", nil), ages("oce_work_lease_overdue_seconds", nil), histogramOf(3, 2))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newStateFx(t)
			tc.drive(f)
			require.Equal(t, tc.want, f.scrape(tc.at, stateFamilies...))
		})
	}
}

// Counters read the audit log incrementally: a second scrape counts
// nothing twice, a new record counts once, and a restored older snapshot
// counts again from its own log.
func TestStateMetricsReadTheAuditOnce(t *testing.T) {
	f := newStateFx(t)
	count := func(sec int) map[string]string {
		return f.scrape(sec, "oce_activations_total", "oce_activation_duration_seconds")
	}
	f.activate(10, 4, "bot", "r1", "")
	var snap bytes.Buffer
	require.NoError(t, f.e.b.SnapshotSave(t.Context(), &snap))
	one := merge(map[string]string{"oce_activations_total": "1"}, histogramOf(4))
	require.Equal(t, one, count(20))
	require.Equal(t, one, count(21), "a second scrape counts nothing again")

	f.activate(30, 12, "helper", "r2", "")
	require.Equal(t, merge(map[string]string{"oce_activations_total": "2"}, histogramOf(4, 12)), count(50))

	require.NoError(t, f.e.b.SnapshotRestore(t.Context(), &snap))
	require.Equal(t, one, count(60), "after an older snapshot's restore, its log is counted afresh")
}

// The scrape identity an operator makes (docs/OPERATIONS.md, "Monitoring"):
// a user bound to metrics-reader cluster-wide, with a token. It reads
// /metrics and no Namespace; the role is never granted within a Namespace,
// nor to a Namespace's service principal.
func TestMetricsReaderBinding(t *testing.T) {
	e := newEnv(t)
	e.seed()
	e.expect(201, "POST", "/v1/namespaces/team/serviceprincipals", map[string]any{"name": "ci"})
	e.expect(201, "POST", "/v1/users", map[string]any{"name": "prometheus"})
	for name, body := range map[string]map[string]any{
		"within a namespace": {"role": "metrics-reader", "namespace": "team",
			"subject": map[string]any{"kind": "user", "name": "prometheus"}},
		"to a service principal": {"role": "metrics-reader",
			"subject": map[string]any{"kind": "servicePrincipal", "name": "team/ci"}},
		"an unknown role": {"role": "metrics-writer", "subject": map[string]any{"kind": "user", "name": "prometheus"}},
	} {
		t.Run(name, func(t *testing.T) {
			e.t = t
			e.reject(400, "INVALID_REQUEST", "POST", "/v1/rolebindings", body)
		})
	}
	e.t = t
	b := e.expect(201, "POST", "/v1/rolebindings", map[string]any{"role": "metrics-reader",
		"subject": map[string]any{"kind": "user", "name": "prometheus"}})
	require.Nil(t, b["namespace"], "granted cluster-wide")
	tok := e.expect(201, "POST", "/v1/tokens", map[string]any{"user": "prometheus", "ttl": "8760h"})["token"].(string)

	r := e.raw("GET", "/metrics", nil, tok)
	require.Equal(t, 200, r.status, string(r.body))
	require.Contains(t, string(r.body), `oce_agent_state{agent="bot",namespace="team",state="stopped"} 1`)
	for _, path := range []string{"/v1/cluster", "/v1/namespaces/team", "/v1/namespaces/team/agents/bot", "/v1/restrictions"} {
		require.Contains(t, []int{403, 404}, e.raw("GET", path, nil, tok).status, path)
	}
	require.Equal(t, 403, e.raw("POST", "/v1/namespaces/team/agents/bot/deploy", nil, tok).status)
}
