package kube

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"oce.dev/oce/coordinator/api/wire"
	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/shared/codes"
)

// TeamB is a second team's oce Namespace on the same cluster.
const TeamB = "team-b"

// TestCredentialsBelongToTheirNamespace: the team's model keys, created
// through occ, are one Secret in the team's own Kubernetes namespace (and
// the deploys of TestEmbeddedOpenClaw and TestDedicatedCodex run on them);
// a second team cannot name them — creating an Agent with a reference
// into the team's Namespace is refused, and deploying an Agent whose
// reference its own Namespace does not hold is refused — each refusal
// leaving no revision, no work and no Kubernetes object, only a denied
// audit record with its actor.
func TestCredentialsBelongToTheirNamespace(t *testing.T) {
	ctx := context.Background()
	team(t)
	// Reads reach any member through the API Service (bounded-stale
	// reads, docs/API.md): a member may not have applied a write yet.
	var teamNS wire.Namespace
	require.Eventually(t, func() bool {
		out, code := runOcc(ctx, "-o", "json", "namespace", "get", Team)
		return code == 0 && json.Unmarshal([]byte(out), &teamNS) == nil
	}, 15*time.Second, 200*time.Millisecond)
	secrets, err := cluster.Client.CoreV1().Secrets("").List(ctx, metav1.ListOptions{
		LabelSelector: kdriver.LabelCredentialSource + "=" + ModelSecret})
	require.NoError(t, err)
	require.Len(t, secrets.Items, 1, "one Secret holds the source")
	sec := secrets.Items[0]
	require.Equal(t, kdriver.DataPlaneNamespace(teamNS.ID), sec.Namespace, "in the team's own Kubernetes namespace")
	require.Equal(t, kdriver.CredentialSecretName(ModelSecret), sec.Name)
	require.Equal(t, teamNS.ID, sec.Labels[kdriver.LabelNamespace])
	require.Equal(t, kdriver.ManagedBy, sec.Labels[kdriver.LabelManagedBy])
	_, err = cluster.Client.CoreV1().Secrets(SystemNS).Get(ctx, ModelSecret, metav1.GetOptions{})
	require.Error(t, err, "nothing of it in the coordinator's namespace")
	var src wire.CredentialSource
	require.Eventually(t, func() bool {
		out, code := runOcc(ctx, "-o", "json", "-n", Team, "credential", "get", ModelSecret)
		return code == 0 && json.Unmarshal([]byte(out), &src) == nil
	}, 15*time.Second, 200*time.Millisecond)
	require.ElementsMatch(t, []string{KeyGood, KeyBad, KeyUpfrontOnly}, src.Keys)
	listed := mustOcc(t, "-n", Team, "credential", "list", "-o", "json")
	for _, v := range modelKeys() {
		require.NotContains(t, listed, v, "no answer carries a value")
	}

	mustOcc(t, "namespace", "create", TeamB)
	mustOcc(t, "-n", TeamB, "config", "create", "cfg", "-f", demoFile(t, "embedded.json"))
	denials := func() []wire.AuditRecord {
		var recs []wire.AuditRecord
		occJSON(t, &recs, "audit", "-n", TeamB, "--limit", "1000", "--oldest-first")
		var out []wire.AuditRecord
		for _, r := range recs {
			if r.Outcome == wire.OutcomeDenied {
				out = append(out, r)
			}
		}
		return out
	}

	// A reference into the team's Namespace, in either spelling: refused.
	for _, ref := range []string{"credential:" + Team + "/" + ModelSecret + "#" + KeyGood,
		"secret://" + Team + "/" + ModelSecret + "#" + KeyGood} {
		out, code := runOcc(ctx, "-n", TeamB, "agent", "create", "thief", "--config", "cfg", "--auth-method", "api_key",
			"--auth-ref", ref)
		require.Equal(t, 1, code, out)
		require.Contains(t, out, string(codes.CrossNamespaceReference))
	}
	var agents []wire.Agent
	occJSON(t, &agents, "-n", TeamB, "agent", "list")
	require.Empty(t, agents)

	// The same name in its own Namespace is a source team-b does not hold.
	mustOcc(t, "-n", TeamB, "agent", "create", "thief", "--config", "cfg", "--auth-method", "api_key",
		"--auth-ref", "credential:"+ModelSecret+"#"+KeyGood)
	out, code := runOcc(ctx, "-n", TeamB, "agent", "deploy", "thief")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, string(codes.CredentialSourceNotFound))
	var revs []wire.Revision
	occJSON(t, &revs, "-n", TeamB, "revisions", "thief")
	require.Empty(t, revs, "no revision was admitted")
	var thief wire.Agent
	require.Eventually(t, func() bool {
		out, code := runOcc(ctx, "-o", "json", "-n", TeamB, "agent", "get", "thief")
		return code == 0 && json.Unmarshal([]byte(out), &thief) == nil
	}, 15*time.Second, 200*time.Millisecond)
	var work []wire.Work
	occJSON(t, &work, "work", "--agent-id", thief.ID)
	require.Empty(t, work)
	require.Empty(t, agentObjects(t, thief.ID), "nothing reached the cluster")

	var d []wire.AuditRecord
	require.Eventually(t, func() bool { d = denials(); return len(d) >= 3 }, 15*time.Second, 200*time.Millisecond)
	require.Len(t, d, 3, "two refused creates, one refused deploy")
	for i, want := range []codes.Code{codes.CrossNamespaceReference, codes.CrossNamespaceReference, codes.CredentialSourceNotFound} {
		require.Equal(t, "bootstrap", d[i].Actor)
		require.Equal(t, string(want), d[i].Details["code"])
		require.True(t, strings.HasPrefix(d[i].Resource, "CredentialSource::"), d[i].Resource)
	}
	require.Equal(t, `CredentialSource::"`+Team+`/`+ModelSecret+`"`, d[0].Resource)
	require.Equal(t, `CredentialSource::"`+TeamB+`/`+ModelSecret+`"`, d[2].Resource)

	mustOcc(t, "-n", TeamB, "agent", "delete", "thief")
}
