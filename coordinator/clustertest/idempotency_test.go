package clustertest

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
)

// TestLostForwardAnswerDeploysOnce is the reproduction: a follower
// forwards a deploy to the leader through a proxy that drops the leader's
// answer. Without a key the follower now says OUTCOME_UNKNOWN — not
// NOT_LEADER — and the revision did commit; with the client (which always
// sends a key and retries with it) one deploy makes exactly one revision.
func TestLostForwardAnswerDeploysOnce(t *testing.T) {
	// Plain HTTP: the proxy drops the first bytes the leader sends back,
	// which under TLS would be its handshake, not its answer.
	c := startCluster(t, clusterOpts{size: 3, httpProxied: true, insecure: true, ipBase: 190})
	ctx := context.Background()
	c.setupWorkload(ctx, t, 1)
	leader := c.waitLeader(c.Nodes)
	follower := c.followerOf(leader)
	// The follower forwards to the address the leader advertises: its proxy.
	info, err := c.info(ctx, follower)
	require.NoError(t, err)
	require.Equal(t, leader.HTTPAdv, info.LeaderHTTP)
	revisions := func() int {
		s := c.awaitState(ctx, t, leader, snapshotOf.unsettled)
		return len(s.revisions[s.agents[0].ID])
	}

	// A caller without a key learns that the outcome is unknown.
	leader.HTTPProxy.DropNextAnswer()
	hc, scheme := c.httpClient()
	req, err := http.NewRequest(http.MethodPost, scheme+follower.HTTPAddr+"/v1/namespaces/"+workloadNS+
		"/agents/agent-0000/deploy", strings.NewReader("{}"))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := hc.Do(req)
	require.NoError(t, err)
	ae := readErr(t, resp)
	require.Equal(t, http.StatusServiceUnavailable, ae.Status)
	require.Equal(t, "OUTCOME_UNKNOWN", string(ae.Code))
	require.Empty(t, ae.Leader(), "nothing invites a blind resend to the leader")
	require.Equal(t, 1, revisions(), "the deploy whose answer was lost did commit")

	// The client sends a key and retries with it: one deploy, one revision.
	leader.HTTPProxy.DropNextAnswer()
	var m client.Meta
	res, err := c.client(follower).Deploy(client.WithMeta(ctx, &m), workloadNS, "agent-0000", wire.Deploy{})
	require.NoError(t, err)
	require.True(t, m.Replayed, "the retry was answered from the key's record")
	require.EqualValues(t, 2, res.Number)
	require.Equal(t, 2, revisions(), "exactly one revision for one deploy")
	c.converged(c.Nodes)
}

func readErr(t *testing.T, resp *http.Response) *client.Error {
	t.Helper()
	defer resp.Body.Close()
	var eb wire.ErrorBody
	require.NoError(t, jsonDecode(resp, &eb))
	return &client.Error{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message, Details: eb.Error.Details}
}
