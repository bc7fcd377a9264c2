package local

// ActivateRevision: the cutover and the Agent's route.

import (
	"context"
	"errors"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// ActivateRevision implements compute.Driver: a staged embedded replacement
// takes over now (the serving gateway stops first, docs/design/seed-000.md#step-3), and
// the Agent's stable endpoint routes to the revision's gateway.
func (d *Driver) ActivateRevision(ctx context.Context, rev state.Revision) error {
	if _, err := topologyOf(rev); err != nil {
		return err
	}
	if err := checkIDs(rev.NamespaceID, rev.AgentID, rev.ID); err != nil {
		return err
	}
	d.mu.Lock()
	r := d.lookup(rev)
	if r == nil || r.Stopped {
		d.mu.Unlock()
		return compute.Transient(codes.ActivationPending, errors.New("local: revision is not prepared"))
	}
	var others []*revRuntime
	if r.Staged {
		for id, o := range d.revs {
			if id != rev.ID && o.AgentID == rev.AgentID && o.Gateway.Alive() {
				others = append(others, o)
			}
		}
	}
	d.mu.Unlock()
	for _, o := range others {
		if _, err := d.stopRuntime(ctx, o); err != nil {
			return err
		}
	}
	if err := d.stopProbe(ctx, r); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if r.Staged || !r.Gateway.Alive() {
		if err := d.startGateway(ctx, rev, r); err != nil {
			return err
		}
	}
	return d.setRoute(rev, r)
}
