package api

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// Metrics derived from the replicated state at scrape time
// (docs/OPERATIONS.md, "Monitoring"). Every member holds the same state, so
// every member reports the same values: dashboards and alerts aggregate
// them with max, never sum.
var (
	workDepthDesc   = prometheus.NewDesc("oce_work_items", "Revision work items by state.", []string{"state"}, nil)
	activationsDesc = prometheus.NewDesc("oce_activations_total",
		"Revision activations recorded in the audit log (openclaw.agents.lifecycle.activate).", nil, nil)
	agentsDesc = prometheus.NewDesc("oce_agents",
		"Agents by the state the API reports (serving, activating, degraded, failed, stopped, deleting).", []string{"state"}, nil)
	// One series per Agent: the cardinality is the number of Agents, the
	// labels are names (the console's and occ's), and an Agent that changes
	// state moves to another series (the old one goes stale).
	agentStateDesc = prometheus.NewDesc("oce_agent_state",
		"1 for every Agent, labelled with its Namespace, its name and the state the API reports.",
		[]string{"namespace", "agent", "state"}, nil)
	agentsHeldDesc = prometheus.NewDesc("oce_agents_held",
		"Agents whose active revision is observed held (a held runtime failure: degraded with a held code).", nil, nil)
	oldestQueuedDesc = prometheus.NewDesc("oce_work_oldest_queued_seconds",
		"Age since creation of the oldest queued work item, by kind; 0 when none is queued.", []string{"kind"}, nil)
	leaseOverdueDesc = prometheus.NewDesc("oce_work_lease_overdue_seconds",
		"How long the claimed work item whose lease lapsed longest ago has been past its lease expiry, by kind "+
			"(its owner stopped renewing and nobody reclaimed it); 0 while every claim is live.", []string{"kind"}, nil)
	activationSecondsDesc = prometheus.NewDesc("oce_activation_duration_seconds",
		"Time from a deploy's acceptance (its activate work created) to its activation's completion (the one activate "+
			"audit record: active revision swapped, predecessors retired).", nil, nil)
	heldFailuresDesc = prometheus.NewDesc("oce_held_failures_total",
		"Activations failed by a held runtime failure, by the held code the revision's runtime recorded.", []string{"code"}, nil)
)

// activationBuckets are the upper bounds of oce_activation_duration_seconds:
// an embedded OpenClaw Gateway's model probe and start take ~30–75 s on a
// small machine, a dedicated Harness longer; the convergence window bounds
// the tail.
var activationBuckets = []float64{1, 2.5, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200}

// heldRevisionFailures are the failure codes of activate work a held runtime
// failure ends with (codes.RevisionFailure's image).
var heldRevisionFailures = map[string]bool{
	string(codes.RevisionAuthenticationFailed): true, string(codes.RevisionCPUStarved): true,
	string(codes.RevisionModelProbeTimeout): true, string(codes.RevisionModelProbeFailed): true,
	string(codes.RevisionLoginFailed): true, string(codes.RevisionStartupFailed): true,
}

// stateCollector reads the replicated state at scrape time. Gauges read the
// current state: the Agents (with the open activate work, indexed once per
// scrape) and the open-work index. Counters and the activation histogram
// read the audit log incrementally: a scrape costs only the records
// appended since the previous one. After a start they are rebuilt from the
// retained audit log, so they count what the log still holds.
type stateCollector struct {
	b   Backend
	now func() time.Time

	mu          sync.Mutex
	auditSeq    int64 // the last audit record read
	activations float64
	activation  histogram
	held        map[string]float64 // by code
}

func newStateCollector(b Backend, now func() time.Time) *stateCollector {
	return &stateCollector{b: b, now: now, activation: newHistogram(activationBuckets), held: map[string]float64{}}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{workDepthDesc, activationsDesc, agentsDesc, agentStateDesc, agentsHeldDesc,
		oldestQueuedDesc, leaseOverdueDesc, activationSecondsDesc, heldFailuresDesc} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.b.Machine()
	c.collectWork(ch, m, c.now())
	c.collectAgents(ch, m)
	c.collectAudit(ch, m)
}

// collectWork reports the queue depth by state, and from the open-work
// index the oldest queued item's age and the longest lapsed lease by kind.
func (c *stateCollector) collectWork(ch chan<- prometheus.Metric, m *state.Machine, now time.Time) {
	depth := map[string]int{state.WorkQueued: 0, state.WorkClaimed: 0, state.WorkCompleted: 0,
		state.WorkFailed: 0, state.WorkSuperseded: 0}
	for _, w := range m.WorkItems(state.WorkFilter{}) {
		depth[w.State]++
	}
	for st, n := range depth {
		ch <- prometheus.MustNewConstMetric(workDepthDesc, prometheus.GaugeValue, float64(n), st)
	}
	oldest, overdue := map[string]time.Duration{}, map[string]time.Duration{}
	for _, w := range m.OpenWorkItems(state.WorkFilter{}) {
		switch {
		case w.State == state.WorkQueued:
			oldest[w.Kind] = max(oldest[w.Kind], now.Sub(w.CreatedAt))
		case w.State == state.WorkClaimed && now.After(w.LeaseExpiry):
			overdue[w.Kind] = max(overdue[w.Kind], now.Sub(w.LeaseExpiry))
		}
	}
	for k := range workKinds { // every kind, 0 when it has none
		ch <- prometheus.MustNewConstMetric(oldestQueuedDesc, prometheus.GaugeValue, oldest[k].Seconds(), k)
		ch <- prometheus.MustNewConstMetric(leaseOverdueDesc, prometheus.GaugeValue, overdue[k].Seconds(), k)
	}
}

// collectAgents derives every Agent's state as the API does (agentStatus)
// and reports the counts by state, one series per Agent, and the held ones.
func (c *stateCollector) collectAgents(ch chan<- prometheus.Metric, m *state.Machine) {
	nsName := map[string]string{}
	for _, ns := range m.Namespaces() {
		nsName[ns.ID] = ns.Name
	}
	activate := map[string][]state.Work{}
	for _, w := range m.OpenWorkItems(state.WorkFilter{Kind: state.WorkActivate}) {
		activate[w.AgentID] = append(activate[w.AgentID], w)
	}
	count := map[string]int{}
	held := 0
	for _, a := range m.Agents("") {
		st := agentStatusWith(m, a, activate[a.ID])
		count[st.State]++
		if st.State == wire.AgentDegraded && st.HeldCode != "" {
			held++
		}
		ch <- prometheus.MustNewConstMetric(agentStateDesc, prometheus.GaugeValue, 1, nsName[a.NamespaceID], a.Name, st.State)
	}
	for _, st := range wire.AgentStates() { // every state, 0 when none
		ch <- prometheus.MustNewConstMetric(agentsDesc, prometheus.GaugeValue, float64(count[st]), st)
	}
	ch <- prometheus.MustNewConstMetric(agentsHeldDesc, prometheus.GaugeValue, float64(held))
}

// collectAudit reads the audit records appended since the last scrape and
// reports the counters and the histogram they feed.
func (c *stateCollector) collectAudit(ch chan<- prometheus.Metric, m *state.Machine) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, _, last := m.AuditStats(); last < c.auditSeq {
		// A restored snapshot replaced the log with an older one: count
		// again from its start (Prometheus reads the drop as a reset).
		c.auditSeq, c.activations, c.activation, c.held = 0, 0, newHistogram(activationBuckets), map[string]float64{}
	}
	for {
		recs := m.Audit(c.auditSeq, maxAuditLimit)
		for _, r := range recs {
			c.read(m, r)
			c.auditSeq = r.Seq
		}
		if len(recs) < maxAuditLimit {
			break
		}
	}
	ch <- prometheus.MustNewConstMetric(activationsDesc, prometheus.CounterValue, c.activations)
	ch <- c.activation.metric(activationSecondsDesc)
	for code, n := range c.held {
		ch <- prometheus.MustNewConstMetric(heldFailuresDesc, prometheus.CounterValue, n, code)
	}
}

// read accounts for one audit record.
func (c *stateCollector) read(m *state.Machine, r state.AuditRecord) {
	switch r.Action {
	case state.AuditActivate:
		c.activations++
		// A deploy's own completion names its work; a predecessor's owed
		// record (finalizedBy) and rollbacks (their own action) do not
		// count as a deploy's activation.
		if id := r.Details["workId"]; id != "" {
			if w, ok := m.Work(id); ok && w.Kind == state.WorkActivate {
				c.activation.observe(max(r.Time.Sub(w.CreatedAt), 0).Seconds())
			}
		}
	case state.AuditFail:
		code := r.Details["code"]
		if r.Details["kind"] != state.WorkActivate || !heldRevisionFailures[code] {
			return
		}
		// The held code is the revision runtime's record, written just
		// before the failure; an Agent deleted before this scrape took it
		// along, and the revision failure code (RUNTIME_…) stands in.
		if rt, ok := m.RevisionRuntime(r.RevisionID); ok && codes.IsRuntimeDiagnostic(codes.Code(rt.HeldCode)) {
			code = rt.HeldCode
		}
		c.held[code]++
	}
}

// histogram accumulates observations for a constant histogram metric.
type histogram struct {
	bounds []float64
	counts []uint64 // per bucket, not cumulative
	count  uint64
	sum    float64
}

func newHistogram(bounds []float64) histogram {
	return histogram{bounds: bounds, counts: make([]uint64, len(bounds))}
}

func (h *histogram) observe(v float64) {
	h.count++
	h.sum += v
	for i, b := range h.bounds {
		if v <= b {
			h.counts[i]++
			return
		}
	}
}

func (h *histogram) metric(d *prometheus.Desc) prometheus.Metric {
	cum := make(map[float64]uint64, len(h.bounds))
	var n uint64
	for i, b := range h.bounds {
		n += h.counts[i]
		cum[b] = n
	}
	return prometheus.MustNewConstHistogram(d, h.count, h.sum, cum)
}
