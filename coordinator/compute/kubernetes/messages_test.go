package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

// SendMessage runs a turn through the active revision's ready Gateway Pod:
// gatewayd's chat route on the Pod's status port, with the Agent's status
// bearer; the streamed deltas and reply come back, a failed turn is a
// TurnError, and without a ready Gateway there is no endpoint.
func TestSendMessageThroughGatewayd(t *testing.T) {
	ctx := context.Background()
	var gotAuth string
	var gotReq contract.ChatRequest
	var failTurn bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, http.MethodPost, r.Method)
		require.Equal(t, contract.RouteChat, r.URL.Path)
		gotAuth = r.Header.Get("Authorization")
		require.NoError(t, json.NewDecoder(r.Body).Decode(&gotReq))
		enc := json.NewEncoder(w)
		if failTurn {
			_ = enc.Encode(contract.ChatEvent{Code: contract.ChatTurnFailed, Message: "model said no"})
			return
		}
		_ = enc.Encode(contract.ChatEvent{Delta: "Hel"})
		_ = enc.Encode(contract.ChatEvent{Delta: "lo"})
		_ = enc.Encode(contract.ChatEvent{Done: true, Reply: "Hello"})
	}))
	defer srv.Close()
	var dialed string
	cs := newClientset()
	st := &HTTPGatewayStatus{Client: cs, HTTP: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dialed = addr
			return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
		}}}}
	d, err := New(Config{GatewayStatus: st, GatewayImage: "registry.invalid/oce/gateway:test", HarnessImage: "registry.invalid/oce/harness:test"}, cs)
	require.NoError(t, err)
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	rev := embeddedRev("r1")
	require.NoError(t, d.PrepareRevision(ctx, rev))
	p, err := d.planFor(rev)
	require.NoError(t, err)
	addPod(t, cs, p.gw, "gateway-0", p.gatewayWantLabels(), true)
	pod, err := cs.CoreV1().Pods(p.gw).Get(ctx, "gateway-0", metav1.GetOptions{})
	require.NoError(t, err)
	pod.Status.PodIP = "10.9.8.7"
	_, err = cs.CoreV1().Pods(p.gw).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, d.ActivateRevision(ctx, rev))
	agent := state.Agent{ID: "a1", NamespaceID: "ns1", Name: "bot", ExecutionMode: state.ModeEmbedded}
	_, _, err = d.SendMessage(ctx, agent, "main", "hi", nil)
	require.ErrorIs(t, err, compute.ErrNoEndpoint, "not active")
	agent.ActiveRevisionID = "r1"
	var deltas []string
	reply, revID, err := d.SendMessage(ctx, agent, "main", "hi", func(s string) { deltas = append(deltas, s) })
	require.NoError(t, err)
	require.Equal(t, "Hello", reply)
	require.Equal(t, "r1", revID)
	require.Equal(t, []string{"Hel", "lo"}, deltas)
	require.Equal(t, contract.ChatRequest{Session: "main", Message: "hi"}, gotReq)
	require.Equal(t, fmt.Sprintf("10.9.8.7:%d", contract.StatusPort), dialed, "the Pod's status port")
	pw, err := cs.CoreV1().Secrets(p.gw).Get(ctx, p.n.password, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "Bearer "+string(pw.Data[contract.SecretStatusToken]), gotAuth, "the Agent's status bearer")

	failTurn = true
	_, _, err = d.SendMessage(ctx, agent, "main", "hi", nil)
	var te *compute.TurnError
	require.ErrorAs(t, err, &te)
	require.Equal(t, contract.ChatTurnFailed, te.Code)

	pod.Status.Conditions[0].Status = corev1.ConditionFalse
	_, err = cs.CoreV1().Pods(p.gw).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, _, err = d.SendMessage(ctx, agent, "main", "hi", nil)
	require.ErrorIs(t, err, compute.ErrNoEndpoint, "no ready Gateway Pod")
}

// The dedicated Gateway mints setup codes naming its node route by cluster
// IP: the pinned OpenClaw refuses ws:// setup codes for names like
// "x.ns.svc" (only loopback, private-LAN addresses and .local hosts).
func TestSetupCodeURLIsTheNodeRouteIP(t *testing.T) {
	d, cs := newFake(t)
	ctx := context.Background()
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	rev := dedicatedRev("r1")
	require.NoError(t, d.PrepareRevision(ctx, rev))
	p, err := d.planFor(rev)
	require.NoError(t, err)
	addPod(t, cs, p.dp, "harness-0", p.harnessWantLabels(), true)
	require.NoError(t, d.PrepareRevision(ctx, rev))
	svc, err := cs.CoreV1().Services(p.gw).Get(ctx, p.n.nodeRoute, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, svc.Spec.ClusterIP)
	gw := envOf(gatewayOf(t, cs, p.gw).Spec.Template.Spec.Containers[0])
	require.Equal(t, "http://"+svc.Spec.ClusterIP+":18789", gw[contract.EnvGatewayPublicURL])

	_, err = nodeRoutePublicURL(&corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}})
	require.ErrorIs(t, err, ErrNotReady)
}

// The Gateway policies admit the coordinator's Pods (and only them, in its
// namespace) to gatewayd's status port, in both topologies; without the
// coordinator's whereabouts there is no such rule.
func TestGatewayPolicyAdmitsTheCoordinator(t *testing.T) {
	for _, rev := range []state.Revision{embeddedRev("r1"), dedicatedRev("r2")} {
		d, _ := newFake(t)
		p, err := d.planFor(rev)
		require.NoError(t, err)
		find := func() []networkingv1.NetworkPolicyIngressRule {
			for _, np := range d.revisionPolicies(p) {
				if np.Name == p.n.policyGateway {
					return np.Spec.Ingress
				}
			}
			require.FailNow(t, "no gateway policy")
			return nil
		}
		for _, r := range find() {
			for _, port := range r.Ports {
				require.NotEqual(t, contract.StatusPort, port.Port.IntValue(), "no status-port rule without the coordinator's place")
			}
		}
		d.cfg.Coordinator = CoordinatorPeer{Namespace: "oce-system", PodLabels: map[string]string{"app.kubernetes.io/name": "oce-coordinator"}}
		rules := find()
		last := rules[len(rules)-1]
		require.Equal(t, contract.StatusPort, last.Ports[0].Port.IntValue())
		require.Len(t, last.From, 1)
		require.Equal(t, map[string]string{"kubernetes.io/metadata.name": "oce-system"}, last.From[0].NamespaceSelector.MatchLabels)
		require.Equal(t, map[string]string{"app.kubernetes.io/name": "oce-coordinator"}, last.From[0].PodSelector.MatchLabels)
	}
}
