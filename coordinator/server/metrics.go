package server

import (
	"crypto/x509"
	"fmt"
	"math"
	"time"

	gometrics "github.com/hashicorp/go-metrics/compat"
	gmprometheus "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/prometheus/client_golang/prometheus"

	"oce.dev/oce/coordinator/certs"
	"oce.dev/oce/coordinator/store"
)

// raftMetricsPrefix prefixes the metrics hashicorp/raft emits through
// go-metrics: raft.commitTime becomes oce_raft_commitTime.
const raftMetricsPrefix = "oce"

// registerRaftMetrics routes the go-metrics hashicorp/raft emits (commit
// and apply latencies, leader contact, replication, snapshots, state
// changes) into reg through go-metrics' Prometheus sink. go-metrics keeps
// one global sink per process, so the latest coordinator of a process
// gets them (a test process may run several; a binary runs one).
func registerRaftMetrics(reg prometheus.Registerer) error {
	sink, err := gmprometheus.NewPrometheusSinkFrom(gmprometheus.PrometheusOpts{Registerer: reg,
		Name: "oce_raft_sink", Expiration: 0})
	if err != nil {
		return fmt.Errorf("server: raft metrics: %w", err)
	}
	cfg := gometrics.DefaultConfig(raftMetricsPrefix)
	cfg.EnableHostname = false
	cfg.EnableHostnameLabel = false
	cfg.EnableRuntimeMetrics = false
	cfg.TimerGranularity = time.Millisecond
	if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
		return fmt.Errorf("server: raft metrics: %w", err)
	}
	return nil
}

// registerStoreMetrics exports the store's own position and counters.
func registerStoreMetrics(reg *prometheus.Registry, st *store.Store) {
	g := func(name, help string, f func(store.Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(st.Stats()) })
	}
	c := func(name, help string, f func(store.Stats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return f(st.Stats()) })
	}
	reg.MustRegister(
		g("oce_raft_leader", "1 while this node is the Raft leader.", func(s store.Stats) float64 {
			if s.Leader {
				return 1
			}
			return 0
		}),
		g("oce_raft_term", "Current Raft term.", func(s store.Stats) float64 { return float64(s.Term) }),
		g("oce_raft_applied_index", "Last Raft index applied to the state machine.", func(s store.Stats) float64 { return float64(s.AppliedIndex) }),
		g("oce_raft_commit_index", "Last Raft index known committed.", func(s store.Stats) float64 { return float64(s.CommitIndex) }),
		c("oce_store_proposals_total", "Proposals made on this node.", func(s store.Stats) float64 { return float64(s.Proposals) }),
		c("oce_store_propose_failures_total", "Proposals that failed for want of leadership.", func(s store.Stats) float64 { return float64(s.ProposeFailures) }),
		c("oce_store_leaderships_total", "Terms in which this node ran leader work.", func(s store.Stats) float64 { return float64(s.Leaderships) }),
	)
}

// registerCertMetrics exports the expiry of the certificate this member
// serves now (the reloader's current pair: a rotated Secret shows at the
// next check), so an alert can fire before it lapses. The certificate is
// parsed once per load by crypto/tls; a scrape reads a field.
func registerCertMetrics(reg prometheus.Registerer, rl *certs.Reloader) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "oce_tls_certificate_expiry_timestamp_seconds",
		Help: "NotAfter of the certificate this member serves (API and Raft), in Unix seconds."},
		func() float64 { return notAfter(rl) }))
}

// notAfter is the serving certificate's NotAfter in Unix seconds; NaN (no
// alert compares true with it) when there is none to read.
func notAfter(rl *certs.Reloader) float64 {
	c := rl.Certificate()
	if c == nil || len(c.Certificate) == 0 {
		return math.NaN()
	}
	leaf := c.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return math.NaN()
		}
	}
	return float64(leaf.NotAfter.Unix())
}
