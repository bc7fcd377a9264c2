package api

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"oce.dev/oce/coordinator/state"
)

// metrics are the API's Prometheus collectors.
type metrics struct {
	requests       *prometheus.CounterVec
	requestSeconds *prometheus.HistogramVec
	proposeSeconds *prometheus.HistogramVec
}

func newMetrics(reg *prometheus.Registry, b Backend) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oce_api_requests_total", Help: "API requests by route and status class.",
		}, []string{"route", "code"}),
		requestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "oce_api_request_seconds", Help: "API request latency by route.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
		proposeSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "oce_coordinator_apply_seconds", Help: "Latency of proposing and applying one command, by command type and outcome.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"type", "outcome"}),
	}
	// Registration errors mean a second New on the same registry; the
	// first registration keeps serving, which is what a test wants.
	for _, c := range []prometheus.Collector{m.requests, m.requestSeconds, m.proposeSeconds,
		&stateCollector{b: b}} {
		_ = reg.Register(c)
	}
	return m
}

// observePropose starts a timer for one proposal.
func (m *metrics) observePropose(typ string) func(error) {
	start := time.Now()
	return func(err error) {
		outcome := "ok"
		if err != nil {
			outcome = "error"
		}
		m.proposeSeconds.WithLabelValues(typ, outcome).Observe(time.Since(start).Seconds())
	}
}

var (
	workDepthDesc   = prometheus.NewDesc("oce_work_items", "Revision work items by state.", []string{"state"}, nil)
	activationsDesc = prometheus.NewDesc("oce_activations_total",
		"Revision activations recorded in the audit log (openclaw.agents.lifecycle.activate).", nil, nil)
)

// stateCollector reads the work queue depth and the activation count from
// the replicated state at scrape time. The activation count is read
// incrementally from the audit log so a scrape costs only new records.
type stateCollector struct {
	b           Backend
	mu          sync.Mutex
	auditSeq    int64
	activations float64
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- workDepthDesc
	ch <- activationsDesc
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.b.Machine()
	depth := map[string]int{state.WorkQueued: 0, state.WorkClaimed: 0, state.WorkCompleted: 0,
		state.WorkFailed: 0, state.WorkSuperseded: 0}
	for _, w := range m.WorkItems(state.WorkFilter{}) {
		depth[w.State]++
	}
	for st, n := range depth {
		ch <- prometheus.MustNewConstMetric(workDepthDesc, prometheus.GaugeValue, float64(n), st)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		recs := m.Audit(c.auditSeq, maxAuditLimit)
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			if r.Action == state.AuditActivate {
				c.activations++
			}
			c.auditSeq = r.Seq
		}
		if len(recs) < maxAuditLimit {
			break
		}
	}
	ch <- prometheus.MustNewConstMetric(activationsDesc, prometheus.CounterValue, c.activations)
}
