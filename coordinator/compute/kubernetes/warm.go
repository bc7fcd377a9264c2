package kubernetes

import (
	"context"

	"k8s.io/client-go/kubernetes"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

var (
	_ compute.Warmer  = (*Driver)(nil)
	_ compute.Standby = (*Driver)(nil)
)

// WarmUp implements compute.Warmer: it starts the caches of every namespace
// revs run in — all at once, so a new leader's are synced within one list
// and watch each, not one namespace per health observation — and waits
// until they are synced or ctx ends.
func (d *Driver) WarmUp(ctx context.Context, revs []state.Revision) bool {
	if !d.cfg.ObserveCache {
		return true
	}
	for _, rev := range revs {
		for _, ns := range namespacesOf(rev) {
			d.cacheFor(ns)
		}
	}
	return d.WaitForCaches(ctx)
}

// KeepWarm implements compute.Standby: a follower's driver holds synced
// caches of exactly the namespaces revs run in. At 10,000 Agents a cold
// new leader spends seconds listing ~60,000 objects (docs/PERFORMANCE.md,
// Scale); a warm follower, elected, lists nothing. Caches of namespaces no
// revision runs in any more (their Agents deleted or moved) are stopped,
// so a long-lived follower does not watch namespaces nobody uses.
func (d *Driver) KeepWarm(ctx context.Context, revs []state.Revision) bool {
	if !d.cfg.ObserveCache {
		return true
	}
	want := map[string]bool{}
	for _, rev := range revs {
		for _, ns := range namespacesOf(rev) {
			want[ns] = true
		}
	}
	d.cacheMu.Lock()
	var drop []string
	for ns := range d.caches {
		if !want[ns] {
			drop = append(drop, ns)
		}
	}
	d.cacheMu.Unlock()
	for _, ns := range drop {
		d.dropCache(ns)
	}
	for ns := range want {
		d.cacheFor(ns)
	}
	return d.WaitForCaches(ctx)
}

// namespacesOf are the namespaces whose caches answer observations of rev
// (none when the driver does not run it: its observation says why).
func namespacesOf(rev state.Revision) []string {
	t, err := topologyOf(rev)
	if err != nil {
		return nil
	}
	if t == contract.DedicatedCodex {
		return []string{gatewayNamespaceOf(rev, t), DataPlaneNamespace(rev.NamespaceID)}
	}
	return []string{gatewayNamespaceOf(rev, t)}
}

// watchClient is the client the caches use (Config.WatchClient).
func (d *Driver) watchClient() kubernetes.Interface {
	if d.cfg.WatchClient != nil {
		return d.cfg.WatchClient
	}
	return d.c
}
