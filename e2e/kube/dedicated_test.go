package kube

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"oce.dev/oce/coordinator/api/wire"
	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/ocproto"
)

// TestDedicatedCodex runs one dedicated Codex Agent through its life on the
// real node: its Gateway (gatewayd + OpenClaw with the codex plugin) in the
// managed Gateway namespace, its Harness (harnessd + the real Codex
// app-server + nodehost) in the data-plane namespace.
//   - deploy → the Harness Pod → its workspace node enrolls with the
//     candidate Gateway (through the nonserving node route) → the Gateway is
//     pinned to that node → ready → a reply produced by the real Codex
//     app-server; a tool turn's file appears in the Harness volume, not the
//     Gateway's;
//   - redeploy, with the coordinator leader's Pod deleted mid-deploy: the
//     predecessor is stopped per docs/design/seed-000.md (every Gateway Pod gone before the
//     Harness is stopped), the activation completes on the new leader
//     exactly once (one activate audit record per activated revision), and
//     the Agent answers again;
//   - stop → SIGTERM reached both supervisors, Gateway gone before the
//     Harness, the claims kept; delete → every object gone, claims too.
func TestDedicatedCodex(t *testing.T) {
	ctx := t.Context()
	team(t)
	occTeam(t, "config", "create", "codex-cfg", "-f", demoFile(t, "dedicated-codex.json"))
	var a wire.Agent
	occJSON(t, &a, "-n", Team, "agent", "create", "coder", "--config", "codex-cfg", "--mode", "dedicated",
		"--auth-method", "api_key", "--auth-ref", authRef(KeyGood))
	pods := watchAgentPods(t, a.ID)
	dp, gwNS := kdriver.DataPlaneNamespace(a.NamespaceID), kdriver.GatewayNamespace(a.NamespaceID)

	// Deploy: Harness → enrolled node → pinned Gateway → ready → Codex replies.
	t0 := time.Now()
	occTeam(t, "agent", "deploy", "coder", "--wait", "--timeout", "15m")
	served := time.Now()
	// deploy --wait saw the Agent serving on one member; occ's next call
	// may reach another through the Service (default reads are
	// bounded-stale, docs/API.md).
	a = servingAgent(t, "coder")
	rev1 := a.ActiveRevisionID
	h := pods.of(kdriver.RoleAgent, rev1)
	require.Len(t, h, 1, "%v", summary(pods.snapshot()))
	harness := h[0]
	require.Equal(t, dp, harness.Namespace)
	gws := pods.of(kdriver.RoleGateway, rev1)
	require.NotEmpty(t, gws)
	for _, g := range gws {
		require.Equal(t, gwNS, g.Namespace)
		require.False(t, g.Created.Before(harness.Running), "the candidate Gateway comes once its Harness runs")
	}
	gw := readyPodOf(t, a.ID, kdriver.RoleGateway)
	node := envOf(gw.Spec.Containers[0].Env)[contract.EnvWorkspaceNodeID]
	require.NotEmpty(t, node, "the serving Gateway is pinned to the enrolled workspace node")
	require.Len(t, gws, 1, "the Gateway started pinned to the provisioned node: no restart to pin it (issue 23)")
	harnessDir := claimDir(t, a.ID, kdriver.RoleAgent)
	id, err := ocproto.LoadIdentity(filepath.Join(harnessDir, contract.ClaimNodeState, "identity.json"))
	require.NoError(t, err, "the node identity lives on the Harness claim")
	require.Equal(t, id.DeviceID, node, "the pinned node is the Harness's own")
	require.Equal(t, rev1, envOf(readyPodOf(t, a.ID, kdriver.RoleAgent).Spec.Containers[0].Env)[contract.EnvRevisionID])

	require.Contains(t, send(t, "coder", "hello codex"), FakeReply,
		"the fake provider's reply through the gateway's codex plugin and the Harness's Codex app-server")
	replied := time.Now()
	podMemory(t, "dedicated Gateway Pod", readyPodOf(t, a.ID, kdriver.RoleGateway))
	podMemory(t, "dedicated Harness Pod", readyPodOf(t, a.ID, kdriver.RoleAgent))
	isolated(t, readyPodOf(t, a.ID, kdriver.RoleGateway), contract.GatewayPort, contract.StatusPort)
	isolated(t, readyPodOf(t, a.ID, kdriver.RoleAgent), contract.AppServerPort, contract.StatusPort)
	figure(t, "dedicated: deploy → Harness Pod Running", harness.Running.Sub(t0))
	figure(t, "dedicated: deploy → Harness Pod Ready", harness.Ready.Sub(t0))
	figure(t, "dedicated: deploy → first Gateway Pod Ready", gws[0].Ready.Sub(t0))
	figure(t, "dedicated: deploy → serving (pinned Gateway Ready)", served.Sub(t0))
	figure(t, "dedicated: deploy → first reply", replied.Sub(t0))

	file := "oce-tool-proof-" + randomHex(4) + ".txt"
	tool := send(t, "coder", "run a command TRIGGER_TOOL_FILE="+file)
	require.Contains(t, tool, "Tool result received.", "Codex ran the tool call and sent its result back")
	require.NotEmpty(t, findFile(harnessDir, file), "the tool's file is in the Harness volume")
	require.Empty(t, findFile(claimDir(t, a.ID, kdriver.RoleGateway), file), "and not in the Gateway's")

	// Redeploy; the coordinator leader's Pod is deleted while the new
	// revision is being prepared.
	var dep wire.Revision
	occJSON(t, &dep, "-n", Team, "agent", "deploy", "coder")
	rev2 := dep.ID
	pods.wait(ctx, t, "the new revision's Harness Pod", func([]podTimes) bool {
		return len(pods.of(kdriver.RoleAgent, rev2)) > 0
	})
	c, err := clusterView(ctx)
	require.NoError(t, err)
	leader := c.LeaderID
	require.NotEmpty(t, leader)
	deleted := time.Now()
	require.NoError(t, cluster.Client.CoreV1().Pods(SystemNS).Delete(ctx, leader, metav1.DeleteOptions{}))
	var newLeader string
	var elected time.Time
	require.Eventually(t, func() bool {
		c, err := clusterView(ctx)
		if err == nil && c.LeaderID != "" && c.LeaderID != leader {
			newLeader, elected = c.LeaderID, time.Now()
			return true
		}
		return false
	}, 3*time.Minute, 250*time.Millisecond, "a new leader")
	require.Eventually(t, func() bool {
		var ag wire.Agent
		out, code := runOcc(ctx, "-n", Team, "-o", "json", "agent", "get", "coder")
		return code == 0 && jsonInto(out, &ag) && ag.ActiveRevisionID == rev2 && ag.Status != nil && ag.Status.State == wire.AgentServing
	}, 15*time.Minute, time.Second, "the activation completes on the new leader")
	activated := time.Now()
	t.Logf("leader %s deleted; %s elected after %v; the revision served %v after the deletion", leader, newLeader,
		elected.Sub(deleted).Round(100*time.Millisecond), activated.Sub(deleted).Round(100*time.Millisecond))
	figure(t, "leader Pod deleted → new leader", elected.Sub(deleted))
	figure(t, "leader Pod deleted (mid-deploy) → revision serving", activated.Sub(deleted))
	require.Eventually(t, func() bool {
		acts := activations(t, a.ID)
		return acts[rev1] == 1 && acts[rev2] == 1 && len(acts) == 2
	}, 2*time.Minute, 500*time.Millisecond, "exactly one activate audit record per activated revision")

	// The predecessor was stopped per docs/design/seed-000.md: every one of its Gateway
	// Pods gone before its Harness was stopped.
	oldH := pods.of(kdriver.RoleAgent, rev1)[0]
	require.False(t, oldH.Deleting.IsZero(), "the predecessor's Harness was stopped")
	for _, g := range pods.of(kdriver.RoleGateway, rev1) {
		require.False(t, g.Gone.IsZero(), "predecessor Gateway Pod %s gone", g.Name)
		require.True(t, g.Gone.Before(oldH.Deleting), "Gateway Pod %s gone before the Harness stopped", g.Name)
	}
	newH := pods.of(kdriver.RoleAgent, rev2)[0]
	require.True(t, oldH.Gone.Before(newH.Created) || oldH.Deleting.Before(newH.Created),
		"the predecessor stopped before the candidate started (dedicated requires stopped predecessors)")
	lastOld := pods.of(kdriver.RoleGateway, rev1)
	newGW := pods.of(kdriver.RoleGateway, rev2)
	require.NotEmpty(t, newGW)
	figure(t, "dedicated: redeploy outage (old Gateway not Ready → new pinned Gateway Ready)",
		readyTime(newGW).Sub(lastOld[len(lastOld)-1].NotReady))
	require.Contains(t, send(t, "coder", "hello again"), FakeReply, "the Agent answers after the redeploy")
	require.NoError(t, oce.waitMembers(ctx), "the deleted member came back and rejoined")

	// Stop: both supervisors get SIGTERM and exit 0; Gateway gone first.
	g := readyPodOf(t, a.ID, kdriver.RoleGateway)
	hp := readyPodOf(t, a.ID, kdriver.RoleAgent)
	gLines, err := cluster.LogLines(ctx, gwNS, g.Name, "gateway")
	require.NoError(t, err)
	hLines, err := cluster.LogLines(ctx, dp, hp.Name, "harness")
	require.NoError(t, err)
	occTeam(t, "agent", "stop", "coder")
	for name, lines := range map[string]func() []string{"gatewayd": gLines, "harnessd": hLines} {
		out := lines()
		recs := logRecords(out)
		require.NotNil(t, record(recs, "stop signal"), "SIGTERM reached %s; its log ends:\n%s", name,
			strings.Join(out[max(0, len(out)-5):], "\n"))
		stopped := record(recs, "stopped")
		require.NotNil(t, stopped, "%s exited", name)
		if name == "gatewayd" {
			require.EqualValues(t, 0, stopped["exit"], "the gateway exited cleanly")
			require.Less(t, stopped["stop_ms"].(float64), float64(kdriver.GatewayTerminationGraceSeconds*1000), "within the stop budget")
		}
	}
	pods.wait(ctx, t, "every Pod gone", func(ps []podTimes) bool {
		for _, p := range ps {
			if p.Gone.IsZero() {
				return false
			}
		}
		return true
	})
	gp, hpT := pods.of(kdriver.RoleGateway, rev2), pods.of(kdriver.RoleAgent, rev2)
	require.True(t, gp[len(gp)-1].Gone.Before(hpT[0].Deleting), "the Gateway is gone before the Harness is stopped")
	require.Eventually(t, func() bool { return getAgent(t, "coder").Status.State == wire.AgentStopped },
		2*time.Minute, 500*time.Millisecond)
	objs := agentObjects(t, a.ID)
	require.Len(t, objs["persistentvolumeclaims"], 2, "stop keeps the Gateway and Harness claims: %v", objs)
	require.Empty(t, objs["pods"])
	require.Empty(t, objs["deployments"])

	occTeam(t, "agent", "delete", "coder")
	require.Eventually(t, func() bool {
		_, code := runOcc(ctx, "-n", Team, "agent", "get", "coder")
		return code != 0
	}, 5*time.Minute, time.Second)
	require.Eventually(t, func() bool { return len(agentObjects(t, a.ID)) == 0 }, time.Minute, 500*time.Millisecond,
		"every object of the Agent is gone: %v", agentObjects(t, a.ID))
}

// readyTime is the first Ready time among Pods (zero when none was).
func readyTime(ps []podTimes) time.Time {
	var out time.Time
	for _, p := range ps {
		if !p.Ready.IsZero() && (out.IsZero() || p.Ready.Before(out)) {
			out = p.Ready
		}
	}
	return out
}
