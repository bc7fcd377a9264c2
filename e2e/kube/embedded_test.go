package kube

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/occ"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

// TestEmbeddedOpenClaw runs one embedded OpenClaw Agent through its life on
// the real node, with the real OpenClaw gateway in the Pod the driver
// renders:
//   - deploy → the Gateway Pod runs → kubelet's readiness probe passes →
//     `occ agent send` gets the fake provider's reply through the gateway;
//   - redeploy → the predecessor's Pod is gone before its successor starts
//     (Recreate), one activate audit record per activated revision, and the
//     Agent answers again;
//   - a rejected key → held before cutover by the coordinator's credential
//     check: no Pod of it starts, the serving Pod keeps answering;
//   - a key only a model turn refuses → cut over, its gateway holds
//     AUTHENTICATION_FAILED, visible through occ within seconds, kubelet
//     never restarts the held container, and the model sees no further
//     request;
//   - stop → SIGTERM reached gatewayd, which exited 0 within its budget;
//     every object of the Agent is gone but its claim;
//   - delete → every object of the Agent is gone, its claim too.
func TestEmbeddedOpenClaw(t *testing.T) {
	ctx := t.Context()
	team(t)
	occTeam(t, "config", "create", "emb-cfg", "-f", demoFile(t, "embedded.json"))
	var a wire.Agent
	occJSON(t, &a, "-n", Team, "agent", "create", "emb", "--config", "emb-cfg", "--auth-method", "api_key",
		"--auth-ref", authRef(KeyGood))
	pods := watchAgentPods(t, a.ID)
	dp := kdriver.DataPlaneNamespace(a.NamespaceID)

	// Deploy → Running → Ready → first reply.
	t0 := time.Now()
	occTeam(t, "agent", "deploy", "emb", "--wait", "--timeout", "10m")
	served := time.Now()
	a = servingAgent(t, "emb")
	rev1 := a.ActiveRevisionID
	require.NotEmpty(t, rev1)
	gw := pods.of(kdriver.RoleGateway, rev1)
	require.Len(t, gw, 1, "%v", summary(pods.snapshot()))
	first := gw[0]
	require.Equal(t, dp, first.Namespace)
	require.False(t, first.Ready.IsZero(), "kubelet's readiness probe passed")
	cs := first.Last.Status.ContainerStatuses
	require.Len(t, cs, 1)
	require.Zero(t, cs[0].RestartCount)
	require.Contains(t, send(t, "emb", "hello from a real Pod"), FakeReply,
		"the fake provider's reply, through the real gateway in its Pod")
	replied := time.Now()
	podMemory(t, "embedded Gateway Pod", readyPodOf(t, a.ID, kdriver.RoleGateway))
	// Network isolation, enforced: no Pod of another namespace reaches the
	// Gateway's port or its status port, while the coordinator's relay
	// (the reply above) reaches the status port.
	isolated(t, readyPodOf(t, a.ID, kdriver.RoleGateway), contract.GatewayPort, contract.StatusPort)
	figure(t, "embedded: deploy → Gateway Pod created", first.Created.Sub(t0))
	figure(t, "embedded: deploy → Pod Running", first.Running.Sub(t0))
	figure(t, "embedded: deploy → Pod Ready (kubelet probe)", first.Ready.Sub(t0))
	figure(t, "embedded: deploy → serving (deploy --wait returned)", served.Sub(t0))
	figure(t, "embedded: deploy → first reply", replied.Sub(t0))

	// Redeploy: Recreate stops the predecessor before its successor starts.
	occTeam(t, "agent", "deploy", "emb", "--wait", "--timeout", "10m")
	a = getAgent(t, "emb")
	rev2 := a.ActiveRevisionID
	require.NotEqual(t, rev1, rev2)
	old := pods.of(kdriver.RoleGateway, rev1)[0]
	next := pods.of(kdriver.RoleGateway, rev2)
	require.Len(t, next, 1)
	require.False(t, old.Deleting.IsZero(), "the predecessor's Pod was deleted")
	require.True(t, old.Deleting.Before(next[0].Created), "the predecessor stopped before its successor was created")
	require.Eventually(t, func() bool {
		acts := activations(t, a.ID)
		return acts[rev1] == 1 && acts[rev2] == 1 && len(acts) == 2
	}, 2*time.Minute, 500*time.Millisecond, "one activate audit record per activated revision")
	require.Contains(t, send(t, "emb", "hello again"), FakeReply, "the Agent answers after the redeploy")
	figure(t, "embedded: redeploy outage (old Pod not Ready → new Pod Ready)", next[0].Ready.Sub(old.NotReady))

	// A key the provider rejects: the coordinator's credential check
	// (before-cutover, the bundle's default order) holds the candidate
	// before the Recreate cutover; no Pod of it ever starts and the serving
	// Pod keeps answering.
	servingPod := readyPodOf(t, a.ID, kdriver.RoleGateway)
	occTeam(t, "agent", "update", "emb", "--auth-method", "api_key", "--auth-ref", authRef(KeyBad))
	out, code := runOcc(ctx, "-n", Team, "agent", "deploy", "emb", "--wait", "--timeout", "5m")
	refused := latestRevision(t, "emb")
	t.Logf("the rejected key's revision: %+v", refused.Runtime)
	require.Equal(t, occ.ExitFailed, code, out)
	require.Contains(t, out, string(codes.AuthenticationFailed), out)
	require.Contains(t, out, "credential", "the credential check says so")
	require.NotEqual(t, rev2, refused.ID)
	require.NotNil(t, refused.Runtime)
	require.Equal(t, "rejected", refused.Runtime.Credential, "refused by the coordinator's check: %+v", refused.Runtime)
	require.Equal(t, rev2, getAgent(t, "emb").ActiveRevisionID, "never cut over")
	require.Empty(t, pods.of(kdriver.RoleGateway, refused.ID), "no Pod of the refused candidate")
	require.Contains(t, send(t, "emb", "still there?"), FakeReply, "the serving revision keeps answering")
	require.Equal(t, servingPod.UID, readyPodOf(t, a.ID, kdriver.RoleGateway).UID, "the serving Pod never stopped")

	// A key only a real model turn refuses passes that check; the staged
	// replacement's model probe runs before the cutover in a probe Pod
	// (issue 23), which holds AUTHENTICATION_FAILED: the candidate is never
	// cut over and the serving Pod keeps answering.
	_, before401 := providerRequests(t)
	occTeam(t, "agent", "update", "emb", "--auth-method", "api_key", "--auth-ref", authRef(KeyUpfrontOnly))
	out, code = runOcc(ctx, "-n", Team, "agent", "deploy", "emb", "--wait", "--timeout", "5m")
	failedAt := time.Now()
	require.Equal(t, occ.ExitFailed, code, out)
	require.Contains(t, out, string(codes.AuthenticationFailed), out)
	rev3 := latestRevision(t, "emb").ID
	require.NotEqual(t, rev2, rev3)
	a = servingAgent(t, "emb")
	require.Equal(t, rev2, a.ActiveRevisionID, "never cut over")
	require.Empty(t, pods.of(kdriver.RoleGateway, rev3), "no Gateway Pod of the refused candidate")
	probe := pods.of(kdriver.RoleProbe, rev3)
	require.Len(t, probe, 1, "the candidate's probe Pod: %v", summary(pods.snapshot()))
	require.Equal(t, dp, probe[0].Namespace)
	require.False(t, probe[0].Running.IsZero())
	figure(t, "embedded: held AUTHENTICATION_FAILED before cutover (probe Pod Running → occ shows it)", failedAt.Sub(probe[0].Running))
	_, after401 := providerRequests(t)
	require.Greater(t, after401, before401, "the probe met the refusing provider")
	require.Contains(t, send(t, "emb", "still serving?"), FakeReply, "the serving revision keeps answering")
	require.Equal(t, servingPod.UID, readyPodOf(t, a.ID, kdriver.RoleGateway).UID, "the serving Pod never stopped")
	pods.wait(ctx, t, "the failed candidate's probe Pod gone", func([]podTimes) bool {
		p := pods.of(kdriver.RoleProbe, rev3)
		return len(p) == 1 && !p[0].Gone.IsZero()
	})
	_, still401 := providerRequests(t)
	require.Equal(t, after401, still401, "no further model request with the bad key")

	// Stop: SIGTERM reaches gatewayd, which exits 0 within its budget;
	// every object of the Agent is gone but its claim.
	cur := readyPodOf(t, a.ID, kdriver.RoleGateway)
	lines, err := cluster.LogLines(ctx, dp, cur.Name, "gateway")
	require.NoError(t, err)
	stopAt := time.Now()
	occTeam(t, "agent", "stop", "emb")
	logged := lines()
	recs := logRecords(logged)
	sig := record(recs, "stop signal")
	require.NotNil(t, sig, "SIGTERM reached the supervisor; the log ends:\n%s",
		strings.Join(logged[max(0, len(logged)-5):], "\n"))
	require.Equal(t, "terminated", sig["signal"])
	stopped := record(recs, "stopped")
	require.NotNil(t, stopped, "gatewayd's closing record")
	require.EqualValues(t, 0, stopped["exit"])
	stopMs := stopped["stop_ms"].(float64)
	require.Less(t, stopMs, float64(kdriver.GatewayTerminationGraceSeconds*1000), "within the stop budget")
	pods.wait(ctx, t, "the Gateway Pod gone", func([]podTimes) bool {
		p := pods.of(kdriver.RoleGateway, rev2)
		return len(p) == 1 && !p[0].Gone.IsZero()
	})
	figure(t, "embedded: stop a serving gateway → Pod gone", pods.of(kdriver.RoleGateway, rev2)[0].Gone.Sub(stopAt))
	// no active revision, and the Agent's latest deploy (the refused key's) failed
	var last wire.Agent
	require.Eventually(t, func() bool {
		last = getAgent(t, "emb")
		return last.ActiveRevisionID == "" && last.Status.State == wire.AgentFailed
	}, 2*time.Minute, 500*time.Millisecond, "the stopped Agent: %+v", &last)
	objs := agentObjects(t, a.ID)
	require.Len(t, objs["persistentvolumeclaims"], 1, "stop keeps the gateway claim (docs/design/seed-000.md): %v", objs)
	require.Empty(t, objs["pods"])
	require.Empty(t, objs["deployments"])

	// Delete: every object of the Agent goes, its claim too.
	occTeam(t, "agent", "delete", "emb")
	require.Eventually(t, func() bool {
		_, code := runOcc(ctx, "-n", Team, "agent", "get", "emb")
		return code != 0
	}, 5*time.Minute, time.Second)
	require.Eventually(t, func() bool { return len(agentObjects(t, a.ID)) == 0 }, time.Minute, 500*time.Millisecond,
		"every object of the Agent is gone: %v", agentObjects(t, a.ID))
}
