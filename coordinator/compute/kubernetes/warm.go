package kubernetes

import (
	"context"

	"k8s.io/client-go/kubernetes"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

var _ compute.Warmer = (*Driver)(nil)

// WarmUp implements compute.Warmer: it starts the caches of every namespace
// revs run in — all at once, so a new leader's are synced within one list
// and watch each, not one namespace per health observation — and waits
// until they are synced or ctx ends.
func (d *Driver) WarmUp(ctx context.Context, revs []state.Revision) bool {
	if !d.cfg.ObserveCache {
		return true
	}
	for _, rev := range revs {
		p, err := d.planFor(rev)
		if err != nil {
			continue // its observation reports the error
		}
		d.cacheFor(p.gw)
		if p.topo == contract.DedicatedCodex {
			d.cacheFor(p.dp)
		}
	}
	return d.WaitForCaches(ctx)
}

// watchClient is the client the caches use (Config.WatchClient).
func (d *Driver) watchClient() kubernetes.Interface {
	if d.cfg.WatchClient != nil {
		return d.cfg.WatchClient
	}
	return d.c
}
