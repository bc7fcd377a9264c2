package kubernetes

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// agentIndex indexes the cached Pods by namespace and Agent label: an
// observation lists one Agent's Pods, and a namespace holds up to hundreds
// of Agents, so a selector scan of the namespace made each observation cost
// as much as the namespace's Pods — and the leader's work at rest grow with
// N × Agents per namespace (issue 27; BenchmarkPodsMatching).
const agentIndex = "oce-agent"

// podAgentKey is the agentIndex key of an Agent's Pods in ns.
func podAgentKey(ns, agent string) string { return ns + "/" + agent }

func indexByAgent(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Labels[LabelAgent] == "" {
		return nil, nil
	}
	return []string{podAgentKey(p.Namespace, p.Labels[LabelAgent])}, nil
}

// podsMatching returns the Pods of ns in idx whose labels carry want:
// through agentIndex when want names an Agent, else by the namespace.
func podsMatching(idx cache.Indexer, ns string, want map[string]string) []*corev1.Pod {
	agent := want[LabelAgent]
	var objs []any
	var err error
	if agent != "" {
		objs, err = idx.ByIndex(agentIndex, podAgentKey(ns, agent))
	}
	if agent == "" || err != nil { // err: an indexer without agentIndex
		objs, _ = idx.ByIndex(cache.NamespaceIndex, ns)
	}
	sel := labels.SelectorFromSet(want)
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && p.Namespace == ns && sel.Matches(labels.Set(p.Labels)) {
			pods = append(pods, p)
		}
	}
	return pods
}
