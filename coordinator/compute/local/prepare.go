package local

// PrepareRevision: directories, secrets, configuration, supervisors.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/atomicfile"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/ocproto"
)

// PrepareRevision implements compute.Driver: it creates the revision's
// directories, secrets and configuration and starts its supervisors without
// routing to them. An embedded replacement is staged while another revision
// of the Agent runs its gateway: both would own the same gateway state, so
// the cutover happens at activation (Recreate). Repeating the call for a
// prepared revision changes nothing.
func (d *Driver) PrepareRevision(ctx context.Context, rev state.Revision) error {
	topo, err := topologyOf(rev)
	if err != nil {
		return err
	}
	if err := checkIDs(rev.NamespaceID, rev.AgentID, rev.ID); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.lookup(rev)
	if r != nil && !r.Stopped {
		switch {
		case r.Staged && d.liveGatewayOf(rev.AgentID, rev.ID) == nil:
			return d.unstage(ctx, rev, r)
		case r.Staged:
			return d.ensureProbe(rev, r)
		case r.Gateway.Alive() || topo == contract.DedicatedCodex && r.Harness.Alive():
			return nil
		}
	}
	if r == nil {
		r = &revRuntime{RevisionID: rev.ID, AgentID: rev.AgentID, Topology: topo, dir: d.RevisionDir(rev)}
		n := 2
		if topo == contract.DedicatedCodex {
			n = 4
		}
		ports, err := freePorts(n)
		if err != nil {
			return compute.Transient(codes.TransientDependency, err)
		}
		r.Ports = Ports{Gateway: ports[0], GatewayStatus: ports[1]}
		if topo == contract.DedicatedCodex {
			r.Ports.HarnessStatus, r.Ports.AppServer = ports[2], ports[3]
		}
	}
	r.Stopped, r.Enrolled, r.EnrollExpiresAtMs, r.ProbePassedAtMs = false, false, 0, 0
	if err := d.materialize(ctx, rev, r); err != nil {
		return err
	}
	d.revs[rev.ID] = r
	if topo == contract.DedicatedCodex && !r.Harness.Alive() {
		if err := d.provisionNode(rev, r); err != nil {
			return err
		}
		if err := d.startHarness(rev, r); err != nil {
			return err
		}
	}
	if topo == contract.Embedded && d.liveGatewayOf(rev.AgentID, rev.ID) != nil {
		r.Staged = true
		if err := r.save(); err != nil {
			return err
		}
		return d.ensureProbe(rev, r)
	}
	return d.startGateway(ctx, rev, r)
}

// materialize writes the revision's directories, secrets and configuration.
func (d *Driver) materialize(ctx context.Context, rev state.Revision, r *revRuntime) error {
	agent := d.AgentDir(rev.NamespaceID, rev.AgentID)
	gw := filepath.Join(r.dir, "gateway")
	dirs := []string{agent, filepath.Join(agent, dirRevisions), r.dir, gw,
		filepath.Join(gw, "secrets"), filepath.Join(gw, "tmp"), filepath.Join(gw, "home"), filepath.Join(gw, "config"),
		filepath.Join(agent, dirGwClaim, "state")}
	if r.Topology == contract.Embedded {
		dirs = append(dirs, d.GatewayWorkspace(rev.NamespaceID, rev.AgentID))
	} else {
		h := filepath.Join(r.dir, "harness")
		dirs = append(dirs, h, filepath.Join(h, "secrets"), filepath.Join(h, "tmp"), filepath.Join(h, "home"),
			filepath.Join(h, "enrollment"), d.HarnessWorkspace(rev.NamespaceID, rev.AgentID),
			filepath.Join(agent, dirHarClaim, contract.ClaimCodexState), filepath.Join(agent, dirHarClaim, contract.ClaimNodeState))
	}
	if err := mkdirs(dirs...); err != nil {
		return compute.Transient(codes.TransientDependency, err)
	}
	password, err := loadOrCreateSecret(filepath.Join(agent, contract.SecretGatewayPassword))
	if err != nil {
		return compute.Transient(codes.TransientDependency, err)
	}
	gwSecrets := filepath.Join(gw, "secrets")
	if err := writeSecret(gwSecrets, contract.SecretGatewayPassword, password); err != nil {
		return compute.Transient(codes.TransientDependency, err)
	}
	if _, err := loadOrCreateSecret(filepath.Join(gwSecrets, contract.SecretStatusToken)); err != nil {
		return compute.Transient(codes.TransientDependency, err)
	}
	doc := rev.Document
	if len(doc) == 0 {
		doc = json.RawMessage("{}")
	}
	// The gateway runs the admitted document compiled for a custom endpoint.
	doc, err = admission.GatewayDocument(doc)
	if err != nil {
		return compute.Permanent(codes.InvalidTarget, fmt.Errorf("local: gateway configuration: %w", err))
	}
	if err := atomicfile.Write(filepath.Join(gw, "config", "openclaw.json"), doc, 0o600); err != nil {
		return compute.Transient(codes.TransientDependency, err)
	}
	var creds map[string][]byte
	if d.cfg.Credentials != nil && rev.HarnessAuth != nil {
		creds, err = d.cfg.Credentials.Resolve(ctx, rev)
		if err != nil {
			var ce *compute.Error
			if errors.As(err, &ce) {
				return err
			}
			return compute.Permanent(codes.HarnessAuthRequired, fmt.Errorf("%w: %w", ErrCredentials, err))
		}
	}
	if r.Topology == contract.Embedded {
		for k, v := range creds {
			if err := writeSecret(gwSecrets, k, v); err != nil {
				return compute.Transient(codes.TransientDependency, err)
			}
		}
		return r.save()
	}
	hSecrets := filepath.Join(r.dir, "harness", "secrets")
	for _, k := range []string{contract.SecretAppServerToken, contract.SecretPluginStatusKey} {
		v, err := loadOrCreateSecret(filepath.Join(hSecrets, k))
		if err != nil {
			return compute.Transient(codes.TransientDependency, err)
		}
		if err := writeSecret(gwSecrets, k, v); err != nil {
			return compute.Transient(codes.TransientDependency, err)
		}
	}
	for k, v := range creds {
		if err := writeSecret(hSecrets, k, v); err != nil {
			return compute.Transient(codes.TransientDependency, err)
		}
	}
	if err := atomicfile.Write(filepath.Join(r.dir, "harness", "native-config.json"), doc, 0o600); err != nil {
		return compute.Transient(codes.TransientDependency, err)
	}
	return r.save()
}

// provisionNode gives a dedicated Agent that has no workspace node yet a
// device identity before its gateway first starts (issue 23): a mode-0600
// file for the Harness's nodehost, its device id pinned by the gateway from
// its first start, so enrolling the node restarts nothing. An Agent whose
// node is recorded keeps it.
func (d *Driver) provisionNode(rev state.Revision, r *revRuntime) error {
	if d.workspaceNode(rev.NamespaceID, rev.AgentID) != "" || r.ProvisionedNodeID != "" {
		return nil
	}
	id, err := ocproto.NewIdentity()
	if err != nil {
		return compute.Transient(codes.TransientDependency, err)
	}
	b, err := id.Marshal()
	if err != nil {
		return compute.Transient(codes.TransientDependency, err)
	}
	if err := atomicfile.Write(nodeIdentityFile(r), b, 0o600); err != nil {
		return compute.Transient(codes.TransientDependency, err)
	}
	r.ProvisionedNodeID = id.DeviceID
	d.log.Info("provisioned the workspace node's identity", "revision", rev.ID, "node", id.DeviceID)
	return r.save()
}
