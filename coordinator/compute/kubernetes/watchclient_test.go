package kubernetes

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"oce.dev/oce/coordinator/state"
)

// TestWatchClientConfig: the caches' client is unthrottled, uncompressed
// and speaks protobuf (JSON accepted), and the driver's config is left as
// it was.
func TestWatchClientConfig(t *testing.T) {
	rc := &rest.Config{Host: "https://127.0.0.1:6443", QPS: 50, Burst: 100}
	wc := WatchClientConfig(rc)
	require.Equal(t, runtime.ContentTypeProtobuf, wc.ContentType)
	require.Equal(t, runtime.ContentTypeProtobuf+","+runtime.ContentTypeJSON, wc.AcceptContentTypes)
	require.True(t, wc.DisableCompression)
	require.NotNil(t, wc.RateLimiter)
	for range 1000 { // far past the driver's burst: never waits
		require.True(t, wc.RateLimiter.TryAccept())
	}
	require.Empty(t, rc.ContentType, "the driver's own config is unchanged")
	require.False(t, rc.DisableCompression)
	require.Nil(t, rc.RateLimiter)
}

// renderedGatewayPods is a namespace's cached Pods at 10,000 Agents over
// 100 Namespaces: 100 embedded Gateway Pods as the API server lists them,
// each from the driver's own rendering, Running and Ready, with the field
// managers' bookkeeping a kubelet and a controller write.
func renderedGatewayPods(tb testing.TB, n int) *corev1.PodList {
	d, cs, _ := newFakeStatus(tb)
	require.NoError(tb, d.EnsureNamespace(context.Background(), state.Namespace{ID: "ns1"}))
	p := prepared(tb, d, embeddedRev("r1"))
	tmpl := gatewayOf(tb, cs, p.gw).Spec.Template
	l := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
	at := metav1.NewTime(time.Unix(1_800_000_000, 0))
	for i := range n {
		pod := corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: *tmpl.ObjectMeta.DeepCopy(),
			Spec: *tmpl.Spec.DeepCopy()}
		pod.Namespace, pod.Name = p.gw, fmt.Sprintf("gateway-a%d-5d8f7c9b4-x%04d", i, i)
		pod.UID = types.UID(fmt.Sprintf("0b6f2a8e-4c1d-4e8a-9f3b-%012d", i))
		pod.ResourceVersion, pod.CreationTimestamp = "123456", at
		pod.Spec.NodeName = "kwok-node-0"
		for _, m := range []string{"kube-controller-manager", "kwok"} {
			pod.ManagedFields = append(pod.ManagedFields, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "v1", Time: &at, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(
					`{"f:metadata":{"f:labels":{".":{},"f:app.kubernetes.io/name":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"gateway\"}":{".":{},"f:image":{},"f:env":{}}}},"f:status":{"f:conditions":{},"f:podIP":{}}}`)}})
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1), StartTime: &at,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: at},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at}}}
		for _, c := range pod.Spec.Containers {
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
				Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}}})
		}
		l.Items = append(l.Items, pod)
	}
	return l
}

// BenchmarkDecodeList decodes one namespace's Pod list (100 Gateways, a
// new leader's list per namespace at 10,000 Agents) as the caches' client
// receives it: protobuf (WatchClientConfig) and, the baseline in the same
// run, JSON (client-go's default).
func BenchmarkDecodeList(b *testing.B) {
	l := renderedGatewayPods(b, 100)
	gv := corev1.SchemeGroupVersion
	jsonS := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{})
	protoS := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	encode := func(s runtime.Serializer) []byte {
		raw, err := runtime.Encode(scheme.Codecs.EncoderForVersion(s, gv), l)
		require.NoError(b, err)
		return raw
	}
	decode := func(s runtime.Serializer, raw []byte) func() int {
		dec := scheme.Codecs.DecoderToVersion(s, gv)
		return func() int {
			var out corev1.PodList
			_, _, err := dec.Decode(raw, nil, &out)
			if err != nil {
				b.Fatal(err)
			}
			return len(out.Items)
		}
	}
	jsonRaw, protoRaw := encode(jsonS), encode(protoS)
	measure := func(f func() int) time.Duration {
		start := time.Now()
		for range b.N {
			if f() != len(l.Items) {
				b.Fatal("not every Pod decoded")
			}
		}
		return time.Since(start) / time.Duration(b.N)
	}
	b.ResetTimer()
	byProto, byJSON := measure(decode(protoS, protoRaw)), measure(decode(jsonS, jsonRaw))
	b.ReportMetric(float64(byProto.Microseconds()), "µs-protobuf")
	b.ReportMetric(float64(byJSON.Microseconds()), "µs-json")
	b.ReportMetric(float64(byProto)/float64(byJSON), "ratio-vs-json")
	b.ReportMetric(float64(len(protoRaw))/float64(len(jsonRaw)), "bytes-ratio-vs-json")
}
