package kubernetes

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// podIndexer is a Pod cache's indexer as the informers make it, with the
// Agent index or without it (the scan baseline).
func podIndexer(t testing.TB, byAgent bool, pods ...*corev1.Pod) cache.Indexer {
	ix := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	if byAgent {
		ix[agentIndex] = indexByAgent
	}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, ix)
	for _, p := range pods {
		require.NoError(t, idx.Add(p))
	}
	return idx
}

func testPod(ns, name string, l map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l}}
}

func podNames(pods []*corev1.Pod) []string {
	var n []string
	for _, p := range pods {
		n = append(n, p.Namespace+"/"+p.Name)
	}
	sort.Strings(n)
	return n
}

// Through the Agent index or by a scan, the same Pods match: those of the
// namespace whose labels carry every wanted label, and no other Agent's or
// namespace's.
func TestPodsMatchingIndexAgreesWithScan(t *testing.T) {
	gw := func(agent string) map[string]string {
		return map[string]string{LabelManagedBy: ManagedBy, LabelAgent: agent, LabelRole: RoleGateway}
	}
	pods := []*corev1.Pod{
		testPod("ns1", "a1-gw", gw("a1")), testPod("ns1", "a1-gw-2", gw("a1")),
		testPod("ns1", "a1-probe", map[string]string{LabelManagedBy: ManagedBy, LabelAgent: "a1", LabelRole: "probe"}),
		testPod("ns1", "a2-gw", gw("a2")), testPod("ns2", "a1-elsewhere", gw("a1")),
		testPod("ns1", "no-agent", map[string]string{LabelManagedBy: ManagedBy, LabelRole: RoleGateway}),
	}
	for _, tc := range []struct {
		name string
		ns   string
		want map[string]string
		pods []string
	}{
		{"an Agent's Gateway Pods", "ns1", gw("a1"), []string{"ns1/a1-gw", "ns1/a1-gw-2"}},
		{"every Pod of an Agent", "ns1", map[string]string{LabelAgent: "a1"}, []string{"ns1/a1-gw", "ns1/a1-gw-2", "ns1/a1-probe"}},
		{"another namespace", "ns2", gw("a1"), []string{"ns2/a1-elsewhere"}},
		{"an Agent with no Pod", "ns1", gw("a3"), nil},
		{"no Agent named: the namespace", "ns1", map[string]string{LabelRole: RoleGateway}, []string{"ns1/a1-gw", "ns1/a1-gw-2", "ns1/a2-gw", "ns1/no-agent"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.pods, podNames(podsMatching(podIndexer(t, true, pods...), tc.ns, tc.want)), "through the index")
			require.Equal(t, tc.pods, podNames(podsMatching(podIndexer(t, false, pods...), tc.ns, tc.want)), "by a scan")
		})
	}
	// an Agent's Pod relabelled or deleted leaves the index
	idx := podIndexer(t, true, pods...)
	moved := pods[0].DeepCopy()
	moved.Labels = gw("a2")
	require.NoError(t, idx.Update(moved))
	require.NoError(t, idx.Delete(pods[1]))
	require.Empty(t, podsMatching(idx, "ns1", gw("a1")))
	require.Equal(t, []string{"ns1/a1-gw", "ns1/a2-gw"}, podNames(podsMatching(idx, "ns1", gw("a2"))))
}

// BenchmarkPodsMatching is one observation's Pod lookup in a namespace of
// 100 Agents (10,000 Agents over 100 Namespaces): through the Agent index
// and, the baseline in the same run, by the selector scan of the namespace
// the observation made before.
func BenchmarkPodsMatching(b *testing.B) {
	const agents = 100
	var pods []*corev1.Pod
	for i := range agents {
		a := fmt.Sprintf("a%d", i)
		pods = append(pods, testPod("ns", a+"-gw", map[string]string{LabelManagedBy: ManagedBy, LabelAgent: a,
			LabelRole: RoleGateway, LabelName: "gateway-" + a}))
	}
	want := map[string]string{LabelManagedBy: ManagedBy, LabelAgent: "a42", LabelRole: RoleGateway, LabelName: "gateway-a42"}
	indexed, scanned := podIndexer(b, true, pods...), podIndexer(b, false, pods...)
	lister := func(idx cache.Indexer) func() int {
		return func() int {
			return len(podsMatching(idx, "ns", want))
		}
	}
	measure := func(f func() int) time.Duration {
		start := time.Now()
		for range b.N {
			if f() != 1 {
				b.Fatal("not exactly the Agent's Pod")
			}
		}
		return time.Since(start) / time.Duration(b.N)
	}
	b.ResetTimer()
	byIndex, byScan := measure(lister(indexed)), measure(lister(scanned))
	b.ReportMetric(float64(byIndex.Nanoseconds()), "ns-by-index")
	b.ReportMetric(float64(byScan.Nanoseconds()), "ns-by-scan")
	b.ReportMetric(float64(byIndex)/float64(byScan), "ratio-vs-scan")
}
