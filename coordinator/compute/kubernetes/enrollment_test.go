package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/ocproto"
)

// fakeStatus is a GatewayStatus over an in-memory Gateway: it mints codes
// valid for one minute of its clock and lists the nodes the test enrolls.
type fakeStatus struct {
	mu    sync.Mutex
	now   time.Time
	mints []Endpoint
	nodes []Node
	err   error
}

func (f *fakeStatus) clock() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }

func (f *fakeStatus) advance(d time.Duration) { f.mu.Lock(); f.now = f.now.Add(d); f.mu.Unlock() }

func (f *fakeStatus) enroll(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes = append(f.nodes, Node{NodeID: id, Connected: true, Commands: []string{"file.read"}})
}

func (f *fakeStatus) disconnect(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.nodes {
		if f.nodes[i].NodeID == id {
			f.nodes[i].Connected = false
		}
	}
}

func (f *fakeStatus) fail(err error) { f.mu.Lock(); f.err = err; f.mu.Unlock() }

func (f *fakeStatus) minted() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.mints) }

func (f *fakeStatus) SetupCode(_ context.Context, _ state.Revision, gw Endpoint) (string, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return "", 0, f.err
	}
	f.mints = append(f.mints, gw)
	return "code-" + strconv.Itoa(len(f.mints)), f.now.Add(time.Minute).UnixMilli(), nil
}

func (f *fakeStatus) Nodes(_ context.Context, _ state.Revision, _ Endpoint) ([]Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return append([]Node(nil), f.nodes...), nil
}

// dedicatedUpToEnrollment prepares a dedicated revision with its Harness
// and Gateway Pods ready, so the next step is enrollment.
func dedicatedUpToEnrollment(t *testing.T, d *Driver, cs *fake.Clientset, rev state.Revision) *plan {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: rev.NamespaceID}))
	require.NoError(t, d.PrepareRevision(ctx, rev))
	p, err := d.planFor(rev)
	require.NoError(t, err)
	addPod(t, cs, p.dp, "harness-0", p.harnessWantLabels(), true)
	require.NoError(t, d.PrepareRevision(ctx, rev))
	addPod(t, cs, p.gw, "gateway-0", p.gatewayWantLabels(), true)
	return p
}

func enrollmentOf(t *testing.T, cs *fake.Clientset, p *plan) *corev1.Secret {
	t.Helper()
	s, err := cs.CoreV1().Secrets(p.dp).Get(context.Background(), p.n.enrollment, metav1.GetOptions{})
	require.NoError(t, err)
	return s
}

func TestEnrollmentMintsOnceAndRecordsNode(t *testing.T) {
	d, cs, st := newFakeStatus(t)
	ctx := context.Background()
	rev := dedicatedRev("r1")
	p := dedicatedUpToEnrollment(t, d, cs, rev)
	require.Zero(t, st.minted(), "no code before the serving Gateway is ready")
	require.Equal(t, []string{KeyNodeIdentity}, keysOf(enrollmentOf(t, cs, p).Data), "only the provisioned identity")

	// The Harness mounts only the setup code and the provisioned identity,
	// mode 0600, where its env says.
	h, err := cs.AppsV1().Deployments(p.dp).Get(ctx, p.n.harness, metav1.GetOptions{})
	require.NoError(t, err)
	var vol *corev1.SecretVolumeSource
	for _, v := range h.Spec.Template.Spec.Volumes {
		if v.Name == "enrollment" {
			vol = v.Secret
		}
	}
	require.NotNil(t, vol)
	require.Equal(t, p.n.enrollment, vol.SecretName)
	require.Equal(t, int32(0o600), *vol.DefaultMode)
	require.Equal(t, []corev1.KeyToPath{{Key: KeySetupCode, Path: enrollmentKey, Mode: ptr(int32(0o600))},
		{Key: KeyNodeIdentity, Path: contract.NodeIdentityFile, Mode: ptr(int32(0o600))}}, vol.Items)
	var file, idFile string
	for _, e := range h.Spec.Template.Spec.Containers[0].Env {
		switch e.Name {
		case "OCE_NODEHOST_ENROLLMENT_FILE":
			file = e.Value
		case contract.EnvNodehostIdentity:
			idFile = e.Value
		}
	}
	require.Equal(t, pathEnrollment+"/"+enrollmentKey, file)
	require.Equal(t, pathEnrollment+"/"+contract.NodeIdentityFile, idFile)

	for range 3 { // engine passes repeat preparation: one code only
		require.NoError(t, d.PrepareRevision(ctx, rev))
	}
	require.Equal(t, 1, st.minted())
	require.Equal(t, Endpoint{Namespace: p.gw, Service: p.n.gateway, RevisionID: "r1", Pod: "gateway-0", TokenSecret: p.n.password}, st.mints[0])
	s := enrollmentOf(t, cs, p)
	require.Equal(t, "code-1", string(s.Data[KeySetupCode]))
	require.Equal(t, strconv.FormatInt(st.clock().Add(time.Minute).UnixMilli(), 10), string(s.Data[KeyExpiresAtMs]))
	require.NotEmpty(t, s.Data[KeySetupID])
	require.Equal(t, "r1", s.Labels[LabelRevision], "revision-owned")

	obs, err := d.ObserveRevision(ctx, rev)
	require.NoError(t, err)
	require.False(t, obs.Ready)
	require.Equal(t, ReasonNodeNotEnrolled, obs.Reason)
	err = d.ActivateRevision(ctx, rev)
	require.ErrorIs(t, err, ErrNotReady, "activation repeats the enrollment check")

	// An expired code is replaced by a fresh one.
	st.advance(2 * time.Minute)
	require.NoError(t, d.PrepareRevision(ctx, rev))
	require.Equal(t, 2, st.minted())
	require.Equal(t, "code-2", string(enrollmentOf(t, cs, p).Data[KeySetupCode]))
	require.NotEmpty(t, enrollmentOf(t, cs, p).Data[KeyNodeIdentity], "minting keeps the provisioned identity")

	// a node that kept an identity of its own (not the provisioned one):
	// the Gateway is restarted pinned to it
	st.enroll("node-abc")
	obs, err = d.ObserveRevision(ctx, rev)
	require.NoError(t, err)
	require.Equal(t, ReasonNodeNotPinned, obs.Reason)
	require.NoError(t, d.PrepareRevision(ctx, rev))
	rollGateway(t, cs, p, "gateway-1")
	obs, err = d.ObserveRevision(ctx, rev)
	require.NoError(t, err)
	require.True(t, obs.Ready, obs.Reason)
	s = enrollmentOf(t, cs, p)
	require.Equal(t, "node-abc", s.Annotations[AnnotationWorkspaceNode])
	require.NotContains(t, s.Data, KeySetupCode, "the consumed code is removed")
	require.NotContains(t, s.Data, KeyNodeIdentity, "the provisioned identity is removed")
	st.advance(time.Hour)
	require.NoError(t, d.PrepareRevision(ctx, rev))
	require.Equal(t, 2, st.minted(), "an enrolled node never gets another code")
	require.NoError(t, d.ActivateRevision(ctx, rev))
}

func TestEnrollmentAlreadyConnectedNodeNeedsNoCode(t *testing.T) {
	d, cs, st := newFakeStatus(t)
	rev := dedicatedRev("r1")
	p := dedicatedUpToEnrollment(t, d, cs, rev)
	st.enroll("node-persisted") // the device token on the workspace survived
	require.NoError(t, d.PrepareRevision(context.Background(), rev))
	require.Zero(t, st.minted())
	require.Equal(t, "node-persisted", enrollmentOf(t, cs, p).Annotations[AnnotationWorkspaceNode])
}

// TestEnrolledNodeIsPinnedInTheGateway: once the workspace node enrolled —
// here one that did not take the provisioned identity — the revision's
// Gateway is rendered with OCE_WORKSPACE_NODE_ID (gatewayd then renders the
// node command allow-list and file-transfer policy), and the revision is
// ready only when the serving Gateway Pod carries it; the Agent's node is
// recorded, so a later revision's Gateway starts pinned.
func TestEnrolledNodeIsPinnedInTheGateway(t *testing.T) {
	d, cs, st := newFakeStatus(t)
	ctx := context.Background()
	rev := dedicatedRev("r1")
	p := dedicatedUpToEnrollment(t, d, cs, rev)
	require.Equal(t, enrollmentOf(t, cs, p).Annotations[AnnotationProvisionedNode],
		podEnv(gatewayOf(t, cs, p.gw).Spec.Template.Spec, contract.EnvWorkspaceNodeID), "the provisioned node before enrollment")
	require.NoError(t, d.PrepareRevision(ctx, rev))
	st.enroll("node-7")
	require.NoError(t, d.PrepareRevision(ctx, rev))
	require.Equal(t, "node-7", podEnv(gatewayOf(t, cs, p.gw).Spec.Template.Spec, contract.EnvWorkspaceNodeID))
	obs, err := d.ObserveRevision(ctx, rev)
	require.NoError(t, err)
	require.False(t, obs.Ready, "the running Gateway Pod predates the pin")
	rollGateway(t, cs, p, "gateway-1")
	obs, err = d.ObserveRevision(ctx, rev)
	require.NoError(t, err)
	require.True(t, obs.Ready, obs.Reason)
	require.NoError(t, d.ActivateRevision(ctx, rev))
	require.Equal(t, "node-7", podEnv(gatewayOf(t, cs, p.gw).Spec.Template.Spec, contract.EnvWorkspaceNodeID), "activation keeps the pin")

	// The next revision's Gateway is created pinned to the Agent's node.
	// (The fake client runs no controllers: remove r1's Gateway by hand.)
	require.NoError(t, cs.AppsV1().Deployments(p.gw).Delete(ctx, p.n.gateway, metav1.DeleteOptions{}))
	rev2 := dedicatedRev("r2")
	require.NoError(t, d.PrepareRevision(ctx, rev2))
	p2, err := d.planFor(rev2)
	require.NoError(t, err)
	addPod(t, cs, p2.dp, "harness-r2", p2.harnessWantLabels(), true)
	require.NoError(t, d.PrepareRevision(ctx, rev2))
	require.Equal(t, "node-7", podEnv(gatewayOf(t, cs, p2.gw).Spec.Template.Spec, contract.EnvWorkspaceNodeID))
}

func TestEnrollmentStatusErrorsAreTransient(t *testing.T) {
	d, cs, st := newFakeStatus(t)
	ctx := context.Background()
	rev := dedicatedRev("r1")
	p := dedicatedUpToEnrollment(t, d, cs, rev)
	before := enrollmentOf(t, cs, p).Data
	boom := errors.New("connection refused")
	st.fail(boom)
	for _, call := range []func() error{
		func() error { return d.PrepareRevision(ctx, rev) },
		func() error { _, err := d.ObserveRevision(ctx, rev); return err },
		func() error { return d.ActivateRevision(ctx, rev) },
	} {
		err := call()
		require.ErrorIs(t, err, boom)
		var ce *compute.Error
		require.ErrorAs(t, err, &ce)
		require.Equal(t, codes.TransientDependency, ce.Code)
		require.False(t, ce.Permanent)
	}
	require.Equal(t, before, enrollmentOf(t, cs, p).Data, "a failed call changes nothing")
	st.fail(nil)
	require.NoError(t, d.PrepareRevision(ctx, rev))
	require.Equal(t, 1, st.minted())
}

func TestEnrollmentForeignSecretRefused(t *testing.T) {
	d, cs, st := newFakeStatus(t)
	ctx := context.Background()
	rev := dedicatedRev("r1")
	p := dedicatedUpToEnrollment(t, d, cs, rev)
	s := enrollmentOf(t, cs, p)
	before := s.Data
	s.Labels[LabelAgent] = "someone-else"
	_, err := cs.CoreV1().Secrets(p.dp).Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	d.setPrepared(rev.ID, 0)
	err = d.PrepareRevision(ctx, rev)
	require.ErrorIs(t, err, ErrForeignWorkload)
	var ce *compute.Error
	require.ErrorAs(t, err, &ce)
	require.True(t, ce.Permanent)
	st.enroll("node-1")
	_, err = d.ObserveRevision(ctx, rev)
	require.ErrorIs(t, err, ErrForeignWorkload)
	require.Zero(t, st.minted())
	require.Equal(t, before, enrollmentOf(t, cs, p).Data, "a foreign Secret is never written")
}

func TestHTTPGatewayStatus(t *testing.T) {
	ctx := context.Background()
	cs := newClientset()
	_, err := cs.CoreV1().Secrets("gw").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pw", Namespace: "gw"},
		Data: map[string][]byte{contract.SecretStatusToken: []byte("tok-1\n")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok-1" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/oce/v1/setup-code":
			_ = json.NewEncoder(w).Encode(map[string]any{"setupCode": "sc", "expiresAtMs": 42})
		case r.Method == http.MethodPut && r.URL.Path == "/oce/v1/workspace/files/AGENTS.md":
			b, _ := io.ReadAll(r.Body)
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write(b)
		case r.Method == http.MethodGet && r.URL.Path == "/oce/v1/nodes":
			_ = json.NewEncoder(w).Encode(map[string]any{"nodes": []map[string]any{{"nodeId": "n1", "connected": true, "commands": []string{"a"}}}})
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	h := &HTTPGatewayStatus{Client: cs, Port: port}
	ep := Endpoint{Namespace: "gw", Service: "gateway-x", PodIP: u.Hostname(), TokenSecret: "pw"}
	require.Equal(t, "http://gateway-x.gw.svc:18791", ep.ServiceURL())

	code, exp, err := h.SetupCode(ctx, state.Revision{}, ep)
	require.NoError(t, err)
	require.Equal(t, "sc", code)
	require.Equal(t, int64(42), exp)
	nodes, err := h.Nodes(ctx, state.Revision{}, ep)
	require.NoError(t, err)
	require.Equal(t, []Node{{NodeID: "n1", Connected: true, Commands: []string{"a"}}}, nodes)

	// a route's refusal comes back as an answer with its body
	st, body, err := h.Call(ctx, ep, http.MethodPut, contract.WorkspaceFileRoute("AGENTS.md"), []byte(`{"content":"x"}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, st)
	require.JSONEq(t, `{"content":"x"}`, string(body))

	for name, bad := range map[string]Endpoint{
		"no pod ip":    {Namespace: "gw", TokenSecret: "pw"},
		"no secret":    {Namespace: "gw", PodIP: u.Hostname(), TokenSecret: "missing"},
		"wrong bearer": {Namespace: "gw", PodIP: u.Hostname(), TokenSecret: "pw"},
	} {
		if name == "wrong bearer" {
			s, err := cs.CoreV1().Secrets("gw").Get(ctx, "pw", metav1.GetOptions{})
			require.NoError(t, err)
			s.Data[contract.SecretStatusToken] = []byte("tok-2")
			_, err = cs.CoreV1().Secrets("gw").Update(ctx, s, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
		_, err := h.Nodes(ctx, state.Revision{}, bad)
		require.ErrorIs(t, err, ErrGatewayStatus, name)
	}
}

// keysOf lists a Secret's data keys, sorted.
func keysOf(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestProvisionedNodeStartsPinned (issue 23): a dedicated Agent without a
// workspace node gets a device identity with its first revision — private
// to the Harness, its device id pinned by the Gateway from its first start
// — so the node enrolling with it makes the revision ready without any
// Gateway restart; the identity then leaves the Secret, and the Agent's
// next revision reuses the recorded node instead of provisioning another.
func TestProvisionedNodeStartsPinned(t *testing.T) {
	d, cs, st := newFakeStatus(t)
	ctx := context.Background()
	rev := dedicatedRev("r1")
	p := dedicatedUpToEnrollment(t, d, cs, rev)
	s := enrollmentOf(t, cs, p)
	provisioned := s.Annotations[AnnotationProvisionedNode]
	require.Len(t, provisioned, 64, "a device id: hex SHA-256 of the public key")
	id, err := ocproto.ParseIdentity(s.Data[KeyNodeIdentity])
	require.NoError(t, err)
	require.Equal(t, provisioned, id.DeviceID)
	gw := gatewayOf(t, cs, p.gw)
	require.Equal(t, provisioned, podEnv(gw.Spec.Template.Spec, contract.EnvWorkspaceNodeID), "pinned from the first start")
	for _, c := range gw.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			require.NotContains(t, e.Value, string(s.Data[KeyNodeIdentity]), "the private key never reaches the Gateway")
		}
	}

	rollGateway(t, cs, p, "gateway-0")              // the Pod its template makes (the fake runs no controllers)
	require.NoError(t, d.PrepareRevision(ctx, rev)) // mints the setup code
	require.Equal(t, 1, st.minted())
	st.enroll(provisioned)
	obs, err := d.ObserveRevision(ctx, rev)
	require.NoError(t, err)
	require.True(t, obs.Ready, obs.Reason)
	require.NoError(t, d.PrepareRevision(ctx, rev))
	require.Equal(t, gw.Spec.Template, gatewayOf(t, cs, p.gw).Spec.Template, "the Gateway is never restarted to pin the node")
	require.NoError(t, d.ActivateRevision(ctx, rev))
	s = enrollmentOf(t, cs, p)
	require.Equal(t, provisioned, s.Annotations[AnnotationWorkspaceNode])
	require.NotContains(t, s.Data, KeySetupCode, "the code is consumed")
	require.NotContains(t, s.Data, KeyNodeIdentity, "the identity is consumed")

	// the next revision: the Agent's node, nothing provisioned
	require.NoError(t, cs.AppsV1().Deployments(p.gw).Delete(ctx, p.n.gateway, metav1.DeleteOptions{}))
	rev2 := dedicatedRev("r2")
	require.NoError(t, d.PrepareRevision(ctx, rev2))
	p2, err := d.planFor(rev2)
	require.NoError(t, err)
	s2 := enrollmentOf(t, cs, p2)
	require.Empty(t, s2.Annotations[AnnotationProvisionedNode])
	require.Empty(t, s2.Data)
	addPod(t, cs, p2.dp, "harness-r2", p2.harnessWantLabels(), true)
	require.NoError(t, d.PrepareRevision(ctx, rev2))
	require.Equal(t, provisioned, podEnv(gatewayOf(t, cs, p2.gw).Spec.Template.Spec, contract.EnvWorkspaceNodeID))
}
