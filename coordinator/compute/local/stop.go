package local

// StopRevision, RetireRevision, DeleteAgentRuntimeCredentials, Shutdown.

import (
	"context"
	"errors"
	"os"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/proc"
)

// StopRevision implements compute.Driver: the Gateway first, observed gone
// (GatewayStopWait), then the Harness.
func (d *Driver) StopRevision(ctx context.Context, rev state.Revision) (compute.StopResult, error) {
	if err := checkIDs(rev.NamespaceID, rev.AgentID, rev.ID); err != nil {
		return compute.StopResult{}, err
	}
	d.mu.Lock()
	r := d.lookup(rev)
	d.mu.Unlock()
	if r == nil {
		return compute.StopResult{Stopped: true}, nil
	}
	return d.stopRuntime(ctx, r)
}

func (d *Driver) stopRuntime(ctx context.Context, r *revRuntime) (compute.StopResult, error) {
	d.mu.Lock()
	wasRunning := r.running()
	cameBack := wasRunning && r.Stops > 0
	gw, har := r.Gateway, r.Harness
	d.mu.Unlock()
	if err := d.stopProbe(ctx, r); err != nil {
		return compute.StopResult{}, err
	}
	if gone, err := proc.Stop(ctx, gw, d.cfg.GatewayStopWait, d.cfg.LeftoverGrace, d.cfg.PollInterval); err != nil {
		return compute.StopResult{}, compute.Transient(codes.TransientDependency, err)
	} else if !gone {
		d.log.Warn("gateway killed after the stop budget", "revision", r.RevisionID)
	}
	if gone, err := proc.Stop(ctx, har, d.cfg.HarnessStopWait, d.cfg.LeftoverGrace, d.cfg.PollInterval); err != nil {
		return compute.StopResult{}, compute.Transient(codes.TransientDependency, err)
	} else if !gone {
		d.log.Warn("harness killed after the stop budget", "revision", r.RevisionID)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	r.Stopped, r.Staged = true, false
	if wasRunning {
		r.Stops++
	}
	if err := r.save(); err != nil && !errors.Is(err, os.ErrNotExist) {
		return compute.StopResult{}, compute.Transient(codes.TransientDependency, err)
	}
	if wasRunning {
		d.log.Info("revision stopped", "revision", r.RevisionID, "cameBack", cameBack)
	}
	return compute.StopResult{Stopped: true, Found: wasRunning, CameBack: cameBack}, nil
}

// RetireRevision implements compute.Driver: the revision's processes stop
// and its own directory goes; the Agent's claims (gateway state, Harness
// workspace) and password stay (docs/design/seed-000.md#step-3).
func (d *Driver) RetireRevision(ctx context.Context, rev state.Revision) error {
	if err := checkIDs(rev.NamespaceID, rev.AgentID, rev.ID); err != nil {
		return err
	}
	if _, err := d.StopRevision(ctx, rev); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if rt, ok := d.routes[rev.AgentID]; ok && rt.revisionID() == rev.ID {
		d.dropRoute(rev.AgentID)
	}
	delete(d.revs, rev.ID)
	if err := os.RemoveAll(d.RevisionDir(rev)); err != nil {
		return compute.Transient(codes.TransientDependency, err)
	}
	return nil
}

// DeleteAgentRuntimeCredentials implements compute.Driver: after every
// revision was retired, the Agent's claims, password and route go.
func (d *Driver) DeleteAgentRuntimeCredentials(ctx context.Context, agent state.Agent) error {
	if err := checkIDs(agent.NamespaceID, agent.ID); err != nil {
		return err
	}
	d.mu.Lock()
	var left []*revRuntime
	for _, r := range d.revs {
		if r.AgentID == agent.ID {
			left = append(left, r)
		}
	}
	d.mu.Unlock()
	for _, r := range left {
		if _, err := d.stopRuntime(ctx, r); err != nil {
			return err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range left {
		delete(d.revs, r.RevisionID)
	}
	d.dropRoute(agent.ID)
	if err := os.RemoveAll(d.AgentDir(agent.NamespaceID, agent.ID)); err != nil {
		return compute.Transient(codes.TransientDependency, err)
	}
	return nil
}

// Shutdown stops every runtime this driver runs (each Gateway before its
// Harness) without recording them as stopped: it is the coordinator going
// away (`occ dev down`), not revision work.
func (d *Driver) Shutdown(ctx context.Context) {
	d.mu.Lock()
	rs := make([]*revRuntime, 0, len(d.revs))
	for _, r := range d.revs {
		rs = append(rs, r)
	}
	d.mu.Unlock()
	done := make(chan struct{}, len(rs))
	for _, r := range rs {
		go func() {
			defer func() { done <- struct{}{} }()
			if _, err := proc.Stop(ctx, r.Probe, d.cfg.GatewayStopWait, d.cfg.LeftoverGrace, d.cfg.PollInterval); err != nil {
				return
			}
			if _, err := proc.Stop(ctx, r.Gateway, d.cfg.GatewayStopWait, d.cfg.LeftoverGrace, d.cfg.PollInterval); err != nil {
				return
			}
			_, _ = proc.Stop(ctx, r.Harness, d.cfg.HarnessStopWait, d.cfg.LeftoverGrace, d.cfg.PollInterval)
		}()
	}
	for range rs {
		<-done
	}
}
