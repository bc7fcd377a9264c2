package integration

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"oce.dev/oce/coordinator/compute"
	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/engine"
	"oce.dev/oce/coordinator/state"
)

// engineRig runs the activation engine over a state.Machine through an
// in-process proposer (no Raft) with the real clock and this driver.
type engineRig struct {
	t     testing.TB
	m     *state.Machine
	p     *engine.LocalProposer
	e     *engine.Engine
	rec   *recorder
	nsID  string
	agent string
	mode  string
}

func newEngineRig(t testing.TB, mode string) *engineRig {
	return newEngineRigWith(t, mode, func(*engine.Config) {}, func(d compute.Driver) compute.Driver { return d })
}

// newEngineRigWith is newEngineRig with the engine's configuration tuned
// and its driver wrapped.
func newEngineRigWith(t testing.TB, mode string, tune func(*engine.Config), wrap func(compute.Driver) compute.Driver) *engineRig {
	cs, rec := recordingClient(t)
	d := wrap(newDriver(t, cs))
	r := &engineRig{t: t, m: state.NewMachine(), rec: rec, nsID: uid("ns-eng"), agent: uid("a"), mode: mode}
	r.p = engine.NewLocalProposer(r.m, engine.RealClock{}, "alice")
	r.propose(state.CmdCreateNamespace, state.CreateNamespace{ID: r.nsID, Name: "eng"})
	r.propose(state.CmdPutConfiguration, state.PutConfiguration{ID: "c-" + r.agent, NamespaceID: r.nsID, Name: "cfg", Document: json.RawMessage(`{}`)})
	r.propose(state.CmdCreateAgent, state.CreateAgent{ID: r.agent, NamespaceID: r.nsID, Name: "bot", ConfigurationID: "c-" + r.agent,
		ExecutionMode: mode, ComputeID: kdriver.Name, HarnessAuth: &state.HarnessAuth{Method: "api_key", CredentialKind: "secret", SourceRef: "secret://x/m#k"}})
	cfg := engine.Config{Owner: "eng", Seed: 1, PollInterval: 20 * time.Millisecond, ReadinessMin: 20 * time.Millisecond,
		ReadinessMax: 200 * time.Millisecond, BackoffBase: 50 * time.Millisecond, BackoffMax: time.Second}
	tune(&cfg)
	r.e = engine.New(cfg, r.p, d, engine.RealClock{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.True(t, err == nil || errors.Is(err, context.Canceled), "engine: %v", err)
		case <-time.After(30 * time.Second):
			t.Error("engine did not stop")
		}
	})
	return r
}

func (r *engineRig) propose(typ state.Named, p any) {
	r.t.Helper()
	_, err := r.p.Propose(context.Background(), typ.Name(), p)
	require.NoError(r.t, err, typ)
}

func (r *engineRig) deploy(revID string) string {
	a, _ := r.m.Agent(r.agent)
	cf, _ := r.m.Configuration(a.ConfigurationID)
	rev := revision(r.nsID, r.agent, revID, r.mode)
	rev.ConfigurationID, rev.ConfigurationGeneration, rev.ComputeID = cf.ID, cf.Generation, kdriver.Name
	r.propose(state.CmdAdmitRevision, state.AdmitRevision{Revision: rev, WorkID: "w-" + revID, MaxAttempts: 10})
	r.e.Notify()
	return "w-" + revID
}

func (r *engineRig) wait(workID string) {
	r.t.Helper()
	var last state.Work
	ok := assertEventually(func() bool {
		w, ok := r.m.Work(workID)
		last = w
		return ok && w.State == state.WorkCompleted
	}, 90*time.Second)
	if !ok {
		r.t.Fatalf("work %s not completed: state=%s code=%s detail=%s", workID, last.State, last.LastCode, last.LastDetail)
	}
}

func assertEventually(cond func() bool, within time.Duration) bool {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		<-tick.C
	}
	return cond()
}

// TestEngineDrivesDriverEndToEnd: deploy, replace, stop and delete through
// the activation engine against the API server, for both topologies.
func TestEngineDrivesDriverEndToEnd(t *testing.T) {
	for _, mode := range []string{state.ModeDedicated, state.ModeEmbedded} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			r := newEngineRig(t, mode)
			dp, gw := kdriver.DataPlaneNamespace(r.nsID), kdriver.GatewayNamespace(r.nsID)
			gwNS := dp
			if mode == state.ModeDedicated {
				gwNS = gw
			}
			r1, r2 := uid("r"), uid("r")
			r.wait(r.deploy(r1))
			a, _ := r.m.Agent(r.agent)
			require.Equal(t, r1, a.ActiveRevisionID)
			require.Len(t, podsOf(t, gwNS, sel(kdriver.LabelAgent, r.agent, kdriver.LabelRevision, r1, kdriver.LabelRole, kdriver.RoleGateway)), 1)

			// Replace.
			r.rec.reset()
			r.wait(r.deploy(r2))
			a, _ = r.m.Agent(r.agent)
			require.Equal(t, r2, a.ActiveRevisionID)
			old, _ := r.m.Revision(r1)
			require.Equal(t, state.RevisionRetired, old.Status)
			require.Eventually(t, func() bool {
				return len(podsOf(t, gwNS, sel(kdriver.LabelAgent, r.agent, kdriver.LabelRevision, r2, kdriver.LabelRole, kdriver.RoleGateway))) == 1 &&
					len(podsOf(t, gwNS, sel(kdriver.LabelAgent, r.agent, kdriver.LabelRevision, r1))) == 0
			}, 30*time.Second, 20*time.Millisecond)
			calls := r.rec.snapshot()
			if mode == state.ModeDedicated {
				// The predecessor's Gateway and Harness were deleted before the
				// candidate's first workload was created.
				delGW, delH, createH := -1, -1, -1
				for i, c := range calls {
					switch {
					case c.Method == "DELETE" && strings.Contains(c.Path, "/namespaces/"+gw+"/deployments/") && delGW < 0:
						delGW = i
					case c.Method == "DELETE" && strings.Contains(c.Path, "/namespaces/"+dp+"/deployments/") && delH < 0:
						delH = i
					case c.Method == "POST" && strings.Contains(c.Path, "/namespaces/"+dp+"/deployments") && createH < 0:
						createH = i
					}
				}
				require.True(t, delGW >= 0 && delH > delGW && createH > delH, "gateway delete %d < harness delete %d < candidate create %d", delGW, delH, createH)
			} else {
				// Embedded: one shared Gateway Deployment, switched with Recreate (no delete).
				dep := getDeployment(t, dp, "gateway-"+strings.Split(podsOf(t, dp, sel(kdriver.LabelAgent, r.agent))[0].Labels[kdriver.LabelName], "-")[1])
				require.Equal(t, r2, dep.Labels[kdriver.LabelRevision])
				for _, c := range calls {
					require.False(t, c.Method == "DELETE" && strings.Contains(c.Path, "/deployments/"), "embedded replacement deletes no Deployment: %s", c.Path)
				}
			}
			pvcs := kinds(inventory(t, r.nsID, r.agent))["pvc"]
			require.Positive(t, pvcs, "claims survive replacement")

			// Stop.
			r.propose(state.CmdRequestStop, state.RequestStop{AgentID: r.agent, WorkID: "w-stop", MaxAttempts: 10})
			r.e.Notify()
			r.wait("w-stop")
			a, _ = r.m.Agent(r.agent)
			require.Empty(t, a.ActiveRevisionID)
			require.Empty(t, podsOf(t, dp, sel(kdriver.LabelAgent, r.agent)))
			require.Empty(t, podsOf(t, gw, sel(kdriver.LabelAgent, r.agent)))
			require.Equal(t, pvcs, kinds(inventory(t, r.nsID, r.agent))["pvc"], "stop keeps claims")

			// Delete.
			r.propose(state.CmdRequestDelete, state.RequestDelete{AgentID: r.agent, WorkID: "w-del", MaxAttempts: 10})
			r.e.Notify()
			// Completing deletion removes the Agent with its work records.
			require.True(t, assertEventually(func() bool { _, ok := r.m.Agent(r.agent); return !ok }, 90*time.Second), "agent deleted")
			require.Equal(t, state.AuditDelete, r.m.Audit(0, 0)[len(r.m.Audit(0, 0))-1].Action)
			require.Empty(t, inventory(t, r.nsID, r.agent))
			_, err := env.Client.CoreV1().Namespaces().Get(ctx, dp, metav1.GetOptions{})
			require.NoError(t, err, "the Namespace's infrastructure stays until the Namespace is deleted")
		})
	}
}
