package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/apitest"
	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
	"oce.dev/oce/shared/codes"
)

const token = "tok"

func serve(t *testing.T, b *apitest.Backend, forward bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(api.New(api.Config{Token: token, Metrics: prometheus.NewRegistry(), ForwardWrites: forward}, b))
	t.Cleanup(srv.Close)
	return srv
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	b := apitest.New()
	c := client.New(serve(t, b, false).URL, token)

	ns, err := c.CreateNamespace(ctx, "team")
	require.NoError(t, err)
	nss, err := c.Namespaces(ctx)
	require.NoError(t, err)
	require.Equal(t, []wire.Namespace{ns}, nss)
	got, err := c.Namespace(ctx, ns.ID)
	require.NoError(t, err)
	require.Equal(t, ns, got)

	cf, err := c.CreateConfiguration(ctx, "team", "cfg", json.RawMessage(admission.ExampleEmbeddedAnthropic))
	require.NoError(t, err)
	require.EqualValues(t, 1, cf.Generation)
	cf2, err := c.UpdateConfiguration(ctx, "team", "cfg", json.RawMessage(admission.ExampleEmbeddedOpenAI))
	require.NoError(t, err)
	require.EqualValues(t, 2, cf2.Generation)
	cf3, err := c.Configuration(ctx, "team", cf.ID)
	require.NoError(t, err)
	require.Equal(t, cf2, cf3)
	cfs, err := c.Configurations(ctx, "team")
	require.NoError(t, err)
	require.Len(t, cfs, 1)

	ag, err := c.CreateAgent(ctx, "team", wire.CreateAgent{Name: "bot", Configuration: "cfg",
		HarnessAuth: &wire.HarnessAuth{Method: "api_key", SourceRef: "secret://team/k#key"}})
	require.NoError(t, err)
	require.Equal(t, wire.ModeEmbedded, ag.ExecutionMode)
	mode := wire.ModeDedicated
	ag2, err := c.UpdateAgent(ctx, "team", "bot", wire.UpdateAgent{ExecutionMode: &mode})
	require.NoError(t, err)
	require.Equal(t, mode, ag2.ExecutionMode)
	embedded := wire.ModeEmbedded
	_, err = c.UpdateAgent(ctx, "team", "bot", wire.UpdateAgent{ExecutionMode: &embedded})
	require.NoError(t, err)
	ags, err := c.Agents(ctx, "team")
	require.NoError(t, err)
	require.Len(t, ags, 1)

	dep, err := c.Deploy(ctx, "team", "bot", wire.Deploy{})
	require.NoError(t, err)
	require.EqualValues(t, 1, dep.Number)
	require.NotEmpty(t, dep.WorkID)
	rev, err := c.Revision(ctx, "team", "bot", "1")
	require.NoError(t, err)
	require.Equal(t, dep.Revision, rev)
	revs, err := c.Revisions(ctx, "team", "bot")
	require.NoError(t, err)
	require.Equal(t, []wire.Revision{rev}, revs)
	aw, err := c.AgentWork(ctx, "team", "bot")
	require.NoError(t, err)
	require.Len(t, aw, 1)
	wk, err := c.WorkItem(ctx, dep.WorkID)
	require.NoError(t, err)
	require.Equal(t, aw[0], wk)
	ws, err := c.Work(ctx, client.WorkFilter{State: wire.WorkQueued, Kind: wire.WorkActivate, AgentID: ag.ID})
	require.NoError(t, err)
	require.Len(t, ws, 1)

	stop, err := c.StopAgent(ctx, "team", "bot")
	require.NoError(t, err)
	require.Equal(t, wire.WorkStop, stop.Kind)
	audit, err := c.Audit(ctx, 0, 10)
	require.NoError(t, err)
	require.NotEmpty(t, audit)
	require.Equal(t, "oce.namespaces.create", audit[0].Action)
	deploys, err := c.AuditQuery(ctx, client.AuditFilter{Action: wire.AuditDeploy, Namespace: "team"})
	require.NoError(t, err)
	require.Len(t, deploys, 1)
	require.Equal(t, `Agent::"team/bot"`, deploys[0].Resource)
	more, err := c.Audit(ctx, audit[len(audit)-1].Seq, 0)
	require.NoError(t, err)
	require.Empty(t, more)

	inst, err := c.Installation(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{wire.ModeEmbedded}, inst.Capabilities.OpenClaw.ExecutionModes)
	st, err := c.Status(ctx)
	require.NoError(t, err)
	require.Len(t, st.Agents, 1)
	require.Equal(t, "team", st.Agents[0].Namespace)

	info, err := c.Cluster(ctx)
	require.NoError(t, err)
	require.Equal(t, b.M.Digest(), info.Digest)
	_, err = c.Join(ctx, "n2", "127.0.0.1:1", "127.0.0.1:2")
	require.NoError(t, err)
	_, err = c.Transfer(ctx, "n2")
	require.NoError(t, err)
	_, err = c.Remove(ctx, "n2")
	require.NoError(t, err)

	var snap bytes.Buffer
	n, err := c.SnapshotSave(ctx, &snap)
	require.NoError(t, err)
	require.EqualValues(t, snap.Len(), n)
	saved := b.M.Digest()
	del, err := c.DeleteAgent(ctx, "team", "bot")
	require.NoError(t, err)
	require.Equal(t, wire.WorkDelete, del.Kind)
	require.NotEqual(t, saved, b.M.Digest())
	_, err = c.SnapshotRestore(ctx, bytes.NewReader(snap.Bytes()))
	require.NoError(t, err)
	// The saved state, plus the restore's own audit record.
	require.NotEqual(t, saved, b.M.Digest())
	a, err := c.Agent(ctx, "team", "bot")
	require.NoError(t, err)
	require.False(t, a.Deleting)
	au := b.M.Audit(0, 0)
	require.Equal(t, "oce.cluster.restore", au[len(au)-1].Action)
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	srv := serve(t, apitest.New(), false)
	_, err := client.New(srv.URL, "wrong").Namespaces(ctx)
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 401, ae.Status)
	require.Equal(t, codes.Unauthorized, ae.Code)

	c := client.New(srv.URL, token)
	_, err = c.Namespace(ctx, "none")
	require.ErrorAs(t, err, &ae)
	require.Equal(t, codes.NotFound, ae.Code)
	_, err = c.CreateNamespace(ctx, "Bad Name")
	require.ErrorAs(t, err, &ae)
	require.Equal(t, codes.InvalidRequest, ae.Code)
	require.Contains(t, ae.Message, "DNS label")
}

func TestFollowsNotLeader(t *testing.T) {
	ctx := context.Background()
	leader := apitest.New()
	lsrv := serve(t, leader, false)
	follower := apitest.New()
	follower.SetFollower(lsrv.URL)
	fsrv := serve(t, follower, false)

	c := client.New(fsrv.URL, token)
	ns, err := c.CreateNamespace(ctx, "team")
	require.NoError(t, err)
	_, ok := leader.M.Namespace(ns.ID)
	require.True(t, ok, "the client followed NOT_LEADER to the leader")
	_, ok = follower.M.Namespace(ns.ID)
	require.False(t, ok)

	// Restore is redirected too; the body is rewound for the second hop.
	var snap bytes.Buffer
	_, err = client.New(lsrv.URL, token).SnapshotSave(ctx, &snap)
	require.NoError(t, err)
	_, err = c.CreateNamespace(ctx, "later")
	require.NoError(t, err)
	_, err = c.SnapshotRestore(ctx, bytes.NewReader(snap.Bytes()))
	require.NoError(t, err)
	nss, err := client.New(lsrv.URL, token).Namespaces(ctx)
	require.NoError(t, err)
	require.Len(t, nss, 1)

	// A follower without a leader yields ErrNotLeader.
	follower.SetFollower("")
	_, err = c.CreateNamespace(ctx, "x")
	require.True(t, errors.Is(err, client.ErrNotLeader), "%v", err)

	// Redirect loops end after a bounded number of hops.
	a, bb := apitest.New(), apitest.New()
	asrv, bsrv := serve(t, a, false), serve(t, bb, false)
	a.SetFollower(bsrv.URL)
	bb.SetFollower(asrv.URL)
	_, err = client.New(asrv.URL, token).CreateNamespace(ctx, "loop")
	require.True(t, errors.Is(err, client.ErrNotLeader), "%v", err)
}

func TestForwardingFollower(t *testing.T) {
	ctx := context.Background()
	leader := apitest.New()
	lsrv := serve(t, leader, false)
	follower := apitest.New()
	follower.SetFollower(lsrv.URL)
	c := client.New(serve(t, follower, true).URL, token)
	ns, err := c.CreateNamespace(ctx, "team")
	require.NoError(t, err)
	_, ok := leader.M.Namespace(ns.ID)
	require.True(t, ok)
}

func TestOutcomeUnknown(t *testing.T) {
	b := apitest.New()
	c := client.New(serve(t, b, false).URL, token)
	b.ProposeHook = func(string) error { return errors.New("store: not the leader; outcome unknown") }
	_, err := c.CreateNamespace(context.Background(), "team")
	require.ErrorIs(t, err, client.ErrOutcomeUnknown)
	require.ErrorIs(t, err, client.ErrNotLeader)
	b.ProposeHook = func(string) error { return &apitest.NotLeaderError{} }
	_, err = c.CreateNamespace(context.Background(), "team")
	require.ErrorIs(t, err, client.ErrNotLeader)
	require.NotErrorIs(t, err, client.ErrOutcomeUnknown)
}

// TestUnixSocketServer: unix:///path reaches a coordinator's API socket.
func TestUnixSocketServer(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	srv := &http.Server{Handler: api.New(api.Config{Token: token, Metrics: prometheus.NewRegistry()}, apitest.New())}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	c := client.New("unix://"+sock, token)
	require.NoError(t, c.Ready(t.Context()))
	ns, err := c.CreateNamespace(t.Context(), "over-unix")
	require.NoError(t, err)
	require.Equal(t, "over-unix", ns.Name)
	require.Error(t, client.New("unix://"+sock+".absent", token).Ready(t.Context()))
}
