package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/coordinator/state"
)

// BenchmarkDeployToActive measures admission → completed activation (one
// activate audit) for an embedded Agent with the memory driver and the
// in-process proposer on the real clock: the 1-node baseline without Raft.
func BenchmarkDeployToActive(b *testing.B) {
	m := state.NewMachine()
	p := NewLocalProposer(m, RealClock{}, "bench")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	must := func(typ state.Named, v any) {
		if _, err := p.Propose(ctx, typ.Name(), v); err != nil {
			b.Fatal(err)
		}
	}
	must(state.CmdCreateNamespace, state.CreateNamespace{ID: "ns1", Name: "one"})
	must(state.CmdPutConfiguration, state.PutConfiguration{ID: "c1", NamespaceID: "ns1", Name: "cfg", Document: json.RawMessage(`{}`)})
	must(state.CmdCreateAgent, state.CreateAgent{ID: "a1", NamespaceID: "ns1", Name: "bot", ConfigurationID: "c1"})
	e := New(Config{Owner: "bench"}, p, memory.New(memory.DefaultCapabilities()), RealClock{}, nil)
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("r%d", i)
		start := time.Now()
		must(state.CmdAdmitRevision, state.AdmitRevision{WorkID: "w" + id, Revision: state.Revision{ID: id, AgentID: "a1",
			NamespaceID: "ns1", Document: json.RawMessage(`{}`), ConfigurationID: "c1", ConfigurationGeneration: 1,
			Harness: state.HarnessIdentity{ID: state.HarnessOpenClaw, Version: "x"}, Mode: state.ModeEmbedded}})
		e.Notify()
		for {
			ch := m.Changed()
			if w, _ := m.Work("w" + id); w.State == state.WorkCompleted {
				break
			} else if w.State == state.WorkFailed {
				b.Fatalf("work failed: %s", w.LastCode)
			}
			<-ch
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	cancel()
	<-done
	slices.Sort(lat)
	pct := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
