package api

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the API's Prometheus collectors.
type metrics struct {
	requests       *prometheus.CounterVec
	requestSeconds *prometheus.HistogramVec
	proposeSeconds *prometheus.HistogramVec
}

func newMetrics(reg *prometheus.Registry, b Backend, now func() time.Time) *metrics {
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
		newStateCollector(b, now)} {
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
