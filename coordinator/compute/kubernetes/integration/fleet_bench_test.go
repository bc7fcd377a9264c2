package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/engine"
	"oce.dev/oce/coordinator/state"
)

// fleet is the activation engine at its production settings over n
// embedded Agents in a few Namespaces, driving the real API server (kwok
// Pods) through a client rate-limited as production's.
type fleet struct {
	m      *state.Machine
	p      *engine.LocalProposer
	e      *engine.Engine
	d      *kdriver.Driver
	rec    *recorder
	agents []string
	nss    []string
	stop   func() // ends the engine's leadership and closes its driver (idempotent)
}

func newFleet(b testing.TB, n, namespaces int, cache bool) *fleet {
	f := fleetState(b, n, namespaces)
	d, rec := observingDriver(b, cache)
	f.lead(b, d, rec)
	return f
}

// fleetState records n embedded Agents in namespaces Namespaces, with no
// leader yet.
func fleetState(b testing.TB, n, namespaces int) *fleet {
	f := &fleet{m: state.NewMachine()}
	f.p = engine.NewLocalProposer(f.m, engine.RealClock{}, "alice")
	propose := func(typ state.Named, p any) {
		_, err := f.p.Propose(context.Background(), typ.Name(), p)
		require.NoError(b, err, typ)
	}
	for i := range namespaces {
		id := uid("ns-fleet")
		propose(state.CmdCreateNamespace, state.CreateNamespace{ID: id, Name: fmt.Sprintf("team-%d", i)})
		propose(state.CmdPutConfiguration, state.PutConfiguration{ID: "c-" + id, NamespaceID: id, Name: "cfg", Document: json.RawMessage(`{}`)})
		f.nss = append(f.nss, id)
	}
	for i := range n {
		ns, id := f.nss[i%namespaces], uid("a")
		propose(state.CmdCreateAgent, state.CreateAgent{ID: id, NamespaceID: ns, Name: fmt.Sprintf("bot-%d", i), ConfigurationID: "c-" + ns,
			ExecutionMode: state.ModeEmbedded, ComputeID: kdriver.Name,
			HarnessAuth: &state.HarnessAuth{Method: "api_key", CredentialKind: "secret", SourceRef: "secret://x/m#k"}})
		f.agents = append(f.agents, id)
	}
	return f
}

// lead starts an engine at production settings over d (a leader), after
// the previous one's leadership ended.
func (f *fleet) lead(b testing.TB, d *kdriver.Driver, rec *recorder) {
	f.d, f.rec = d, rec
	// production settings: only the owner and the seed are the test's
	f.e = engine.New(engine.Config{Owner: "fleet", Seed: 1}, f.p, d, engine.RealClock{}, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	d.NotifyChanges(f.e.ObserveAgents) // as the server wires it
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.e.Run(ctx) }()
	var once sync.Once
	f.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				require.True(b, err == nil || errors.Is(err, context.Canceled), "engine: %v", err)
			case <-time.After(60 * time.Second):
				b.Error("engine did not stop")
			}
			d.Close()
		})
	}
	b.Cleanup(f.stop)
}

// deployAll admits one revision per Agent at once and waits until every
// one is active or its work failed (what a starved driver does: issue 27
// saw MAX_ATTEMPTS_EXHAUSTED); it returns the time and the failures.
func (f *fleet) deployAll(b testing.TB) (time.Duration, int) {
	start := time.Now()
	var works []string
	for _, id := range f.agents {
		a, _ := f.m.Agent(id)
		cf, _ := f.m.Configuration(a.ConfigurationID)
		rev := revision(a.NamespaceID, id, uid("r"), state.ModeEmbedded)
		rev.ConfigurationID, rev.ConfigurationGeneration, rev.ComputeID = cf.ID, cf.Generation, kdriver.Name
		_, err := f.p.Propose(context.Background(), state.CmdAdmitRevision.Name(), state.AdmitRevision{Revision: rev, WorkID: "w-" + rev.ID, MaxAttempts: 10})
		require.NoError(b, err)
		works = append(works, "w-"+rev.ID)
	}
	f.e.Notify()
	failed := 0
	ok := assertEventually(func() bool {
		failed = 0
		for _, w := range works {
			wk, ok := f.m.Work(w)
			switch {
			case ok && wk.State == state.WorkFailed:
				failed++
			case !ok || wk.State != state.WorkCompleted:
				return false
			}
		}
		return true
	}, 30*time.Minute+time.Duration(len(works))*500*time.Millisecond) // 10,000: under two hours
	require.True(b, ok, "every deploy ended")
	codes := map[string]int{}
	for _, w := range works {
		if wk, _ := f.m.Work(w); wk.State == state.WorkFailed {
			codes[wk.LastCode]++
			if codes[wk.LastCode] == 1 {
				b.Logf("failed %s: %s: %s", w, wk.LastCode, wk.LastDetail)
			}
		}
	}
	return time.Since(start), failed
}

// BenchmarkFleet deploys N embedded Agents at once through the engine at
// production settings (client 50/s burst 100, health interval 2 s) on the
// real API server with kwok, then measures what the coordinator asks of
// the API server at rest — without and with the observation cache, in the
// same run.
func BenchmarkFleet(b *testing.B) {
	for _, n := range []int{50, 200} {
		for _, cache := range []bool{false, true} {
			b.Run(fmt.Sprintf("agents=%d/cache=%v", n, cache), func(b *testing.B) {
				for range b.N {
					f := newFleet(b, n, 10, cache)
					took, failed := f.deployAll(b)
					// every active Agent observed ready once, then a window
					// at rest
					ok := assertEventually(func() bool {
						for _, id := range f.agents {
							if a, _ := f.m.Agent(id); a.ActiveRevisionID == "" {
								continue
							}
							if h, ok := f.m.Health(id); !ok || !h.Ready {
								return false
							}
						}
						return true
					}, 5*time.Minute)
					require.True(b, ok, "every Agent observed ready")
					f.rec.reset()
					window := 20 * time.Second
					time.Sleep(window) // a rate over a window: nothing to wait for
					reqs := f.rec.count()
					degraded := 0
					for _, id := range f.agents {
						if a, _ := f.m.Agent(id); a.ActiveRevisionID == "" {
							continue
						}
						if h, _ := f.m.Health(id); !h.Ready {
							degraded++
						}
					}
					b.ReportMetric(took.Seconds(), "s-deploy-all")
					b.ReportMetric(float64(failed), "deploys-failed")
					b.ReportMetric(float64(reqs)/window.Seconds(), "requests/s-at-rest")
					b.ReportMetric(float64(degraded), "not-ready-at-rest")
				}
			})
		}
	}
}
