// Package integration tests the Kubernetes compute driver against a real
// kube-apiserver (etcd, controller-manager, scheduler and kwok from
// scripts/k8s-testenv), started once for the test binary by k8stest.
package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"oce.dev/oce/shared/netns"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/compute/kubernetes/k8stest"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

var env *k8stest.Env

// TestMain runs the suite in a PID namespace of its own (host network): no
// control-plane process outlives the binary.
func TestMain(m *testing.M) {
	netns.Main(netns.RunnerFunc(func() int { return k8stest.Main(m, &env) }), netns.Options{HostNetwork: true})
}

var seq atomic.Int64

// uid returns a fresh label-safe id with prefix.
func uid(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e6, seq.Add(1))
}

// call is one recorded API request.
type call struct {
	At     time.Time
	Method string
	Path   string
	Watch  bool
	Query  string
	Body   string
}

// recorder is a client-go transport wrapper that records every request.
type recorder struct {
	mu    sync.Mutex
	calls []call
	rt    http.RoundTripper
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	c := call{At: time.Now(), Method: req.Method, Path: req.URL.Path, Watch: req.URL.Query().Get("watch") == "true", Query: req.URL.RawQuery}
	if req.Body != nil && req.Method == http.MethodDelete {
		b, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(b))
		c.Body = string(b)
	}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	return r.rt.RoundTrip(req)
}

func (r *recorder) snapshot() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

// breakdown summarizes the recorded requests by verb and resource, e.g.
// "WATCH pods 3, GET secrets 1".
func (r *recorder) breakdown() string {
	n := map[string]int{}
	for _, c := range r.snapshot() {
		verb := c.Method
		if c.Watch {
			verb = "WATCH"
		}
		parts := strings.Split(strings.Trim(c.Path, "/"), "/")
		resource := parts[len(parts)-1]
		for i, p := range parts { // …/namespaces/NS/RESOURCE[/NAME]
			if p == "namespaces" && i+2 < len(parts) {
				resource = parts[i+2]
			}
		}
		n[verb+" "+resource]++
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s %d", k, n[k]))
	}
	return strings.Join(out, ", ")
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// recordingClient returns a clientset whose requests r records.
func recordingClient(t testing.TB) (kubernetes.Interface, *recorder) {
	t.Helper()
	r := &recorder{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { r.rt = rt; return r })
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs, r
}

const (
	gatewayImage = "registry.invalid/oce/gateway:test" // kwok never pulls or runs it
	harnessImage = "registry.invalid/oce/harness:test"
	modelSecret  = "sk-test-model-credential"
)

func newDriver(t testing.TB, cs kubernetes.Interface) *kdriver.Driver {
	t.Helper()
	// kwok runs no Gateway: its node enrolls on the first code
	d, err := kdriver.New(driverConfig(newFakeGateway(true)), cs)
	require.NoError(t, err)
	return d
}

// driverConfig is the suite's driver configuration over st.
func driverConfig(st kdriver.GatewayStatus) kdriver.Config {
	return kdriver.Config{GatewayImage: gatewayImage, HarnessImage: harnessImage,
		StorageClass: k8stest.StorageClassName, PollInterval: 20 * time.Millisecond, GatewayStatus: st,
		Credentials: kdriver.CredentialsFunc(func(_ context.Context, rev state.Revision) (map[string][]byte, error) {
			if rev.Mode == state.ModeEmbedded {
				return map[string][]byte{contract.SecretModelAPIKey: []byte(modelSecret)}, nil
			}
			return map[string][]byte{contract.SecretOpenAIAPIKey: []byte(modelSecret)}, nil
		})}
}

func revision(nsID, agentID, revID, mode string) state.Revision {
	h := state.HarnessIdentity{ID: state.HarnessOpenClaw, Version: "2026.9.6"}
	if mode == state.ModeDedicated {
		h = state.HarnessIdentity{ID: state.HarnessCodex, Version: "0.169.0"}
	}
	return state.Revision{ID: revID, AgentID: agentID, NamespaceID: nsID, Mode: mode, Harness: h,
		Document: []byte(`{"agents":{"defaults":{"model":"openai/gpt-5"}}}`), CreatedAt: time.Now(),
		HarnessAuth: &state.HarnessAuth{Method: "api_key", CredentialKind: "secret", SourceRef: "secret://x/model#key"}}
}

// prepareUntilReady repeats Prepare + Observe (as the engine's passes do)
// until the revision is ready.
func prepareUntilReady(t testing.TB, d *kdriver.Driver, rev state.Revision) {
	t.Helper()
	ctx := context.Background()
	var last string
	ok := assert.Eventually(t, func() bool {
		if err := d.PrepareRevision(ctx, rev); err != nil {
			last = "prepare: " + err.Error()
			return false
		}
		obs, err := d.ObserveRevision(ctx, rev)
		if err != nil {
			last = "observe: " + err.Error()
			return false
		}
		last = obs.Reason + string(obs.HeldCode)
		return obs.Ready
	}, 60*time.Second, 20*time.Millisecond)
	if !ok {
		t.Fatalf("revision %s not ready: %s", rev.ID, last)
	}
}

func podsOf(t testing.TB, ns, selector string) []corev1.Pod {
	t.Helper()
	l, err := env.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	return l.Items
}

func sel(kv ...string) string {
	var parts []string
	for i := 0; i+1 < len(kv); i += 2 {
		parts = append(parts, kv[i]+"="+kv[i+1])
	}
	return strings.Join(parts, ",")
}
