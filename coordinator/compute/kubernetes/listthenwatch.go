package kubernetes

import "k8s.io/client-go/kubernetes"

// Why the caches list, then watch (issue 27): client-go fills an informer
// by default with a streaming list — a watch asking for the initial
// objects, answered only once the API server's watch cache is as fresh as
// etcd (it waits up to 3 s for that, then fails and the client backs off
// and asks again). A new leader opens a list and a watch per kind and
// namespace of every active Agent at once (500 at 100 Namespaces); at
// 10,000 Agents its streams received nothing for ~11 s (client-go's
// "awaiting required bookmark event" warnings) and its caches were not
// warm within WarmUpTimeout. A plain list from the watch cache
// (resourceVersion 0) waits for no freshness: it is answered at once, then
// the watch carries on from it. BenchmarkScale measures both, with the
// API server's own account of the freshness waits. Streaming lists spare the API server a large list's memory; a
// namespace's list of oce objects is small (100 Agents' worth).
//
// A cache so filled may start a moment behind etcd, as any watch may lag:
// it only ever confirms what a direct read would have said moments
// earlier (cache.go), and what gates a write is read through the API
// server.

// listThenWatch is a client whose informers list, then watch: client-go
// turns streaming lists off for a client that says it does not support
// them (util/watchlist.DoesClientNotSupportWatchListSemantics).
type listThenWatch struct {
	kubernetes.Interface
}

// IsWatchListSemanticsUnSupported reports that informers of this client
// list, then watch.
func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }
