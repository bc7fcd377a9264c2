package kube

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
)

// podTimes is what the watcher saw of one Pod, in this process's clock:
// when it was created, ran (a container started), became Ready, stopped
// being Ready, got its deletion, and disappeared.
type podTimes struct {
	Name, Namespace string
	UID             types.UID
	Role, Revision  string
	Created         time.Time
	Running         time.Time
	Ready           time.Time
	NotReady        time.Time // after Ready
	Deleting        time.Time
	Gone            time.Time
	Last            *corev1.Pod // the last state seen (terminated containers)
}

// podWatch records the lifecycle of an Agent's Pods (both namespaces) as
// the API server announces it: tests wait on these events and read
// figures from them instead of polling.
type podWatch struct {
	mu      sync.Mutex
	pods    map[types.UID]*podTimes
	changed chan struct{}
	stop    chan struct{}
}

// watchAgentPods starts a watcher of every Pod labelled with the Agent.
func watchAgentPods(t testing.TB, agentID string) *podWatch {
	t.Helper()
	w := &podWatch{pods: map[types.UID]*podTimes{}, changed: make(chan struct{}, 1), stop: make(chan struct{})}
	f := informers.NewSharedInformerFactoryWithOptions(cluster.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = kdriver.LabelAgent + "=" + agentID }))
	inf := f.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.seen(obj, false) },
		UpdateFunc: func(_, obj any) { w.seen(obj, false) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			w.seen(obj, true)
		},
	})
	require.NoError(t, err)
	f.Start(w.stop)
	require.True(t, cache.WaitForCacheSync(t.Context().Done(), inf.HasSynced))
	t.Cleanup(func() { close(w.stop); f.Shutdown() })
	return w
}

func (w *podWatch) seen(obj any, gone bool) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	w.mu.Lock()
	pt := w.pods[p.UID]
	if pt == nil {
		pt = &podTimes{Name: p.Name, Namespace: p.Namespace, UID: p.UID, Role: p.Labels[kdriver.LabelRole],
			Revision: p.Labels[kdriver.LabelRevision], Created: now}
		w.pods[p.UID] = pt
	}
	pt.Last = p.DeepCopy()
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil && pt.Running.IsZero() {
			pt.Running = now
		}
	}
	ready := podReady(p)
	switch {
	case ready && pt.Ready.IsZero():
		pt.Ready = now
	case !ready && !pt.Ready.IsZero() && pt.NotReady.IsZero():
		pt.NotReady = now
	}
	if p.DeletionTimestamp != nil && pt.Deleting.IsZero() {
		pt.Deleting = now
	}
	if gone && pt.Gone.IsZero() {
		pt.Gone = now
		if pt.NotReady.IsZero() && !pt.Ready.IsZero() {
			pt.NotReady = now
		}
	}
	w.mu.Unlock()
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// snapshot copies every Pod seen, oldest first.
func (w *podWatch) snapshot() []podTimes {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]podTimes, 0, len(w.pods))
	for _, p := range w.pods {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// of returns the Pods of a role (and revision, when set), oldest first.
func (w *podWatch) of(role, revision string) []podTimes {
	var out []podTimes
	for _, p := range w.snapshot() {
		if p.Role == role && (revision == "" || p.Revision == revision) {
			out = append(out, p)
		}
	}
	return out
}

// wait blocks until cond holds for the Pods seen, or ctx ends.
func (w *podWatch) wait(ctx context.Context, t testing.TB, what string, cond func([]podTimes) bool) []podTimes {
	t.Helper()
	for {
		s := w.snapshot()
		if cond(s) {
			return s
		}
		select {
		case <-ctx.Done():
			require.FailNow(t, "waiting for "+what, "pods: %+v", summary(s))
		case <-w.changed:
		}
	}
}

// summary is a short view of the Pods for failure messages.
func summary(ps []podTimes) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Namespace+"/"+p.Name+" role="+p.Role+" rev="+p.Revision+
			" running="+stamp(p.Running)+" ready="+stamp(p.Ready)+" gone="+stamp(p.Gone))
	}
	return out
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format("15:04:05.000")
}
