package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/atomicfile"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/proc"
	"oce.dev/oce/shared/status"
)

// Readiness reasons (closed set).
const (
	ReasonReady           = "ready"
	ReasonNotPrepared     = "not-prepared"
	ReasonStopped         = "stopped"
	ReasonStaged          = "staged"
	ReasonHeld            = "held"
	ReasonGatewayExited   = "gateway-exited"
	ReasonHarnessExited   = "harness-exited"
	ReasonGatewayNotReady = "gateway-not-ready"
	ReasonHarnessNotReady = "harness-not-ready"
	ReasonEnrolling       = "node-not-enrolled"
)

var httpClient = &http.Client{}

// ObserveRevision implements compute.Driver. A held failure of either
// supervisor (its /openclaw/runtime/status runtimeFailure) is reported in
// HeldCode. A dedicated revision is ready only when both supervisors are
// ready and its workspace node was observed enrolled: until then each
// observation advances enrollment — it mints a one-use setup code through
// the candidate gateway's status route and delivers it to the Harness as a
// mode-0600 file (again only after the previous code expired).
func (d *Driver) ObserveRevision(ctx context.Context, rev state.Revision) (compute.Observation, error) {
	if err := checkIDs(rev.NamespaceID, rev.AgentID, rev.ID); err != nil {
		return compute.Observation{}, err
	}
	d.mu.Lock()
	r := d.lookup(rev)
	var snap revRuntime
	if r != nil {
		snap = *r
	}
	d.mu.Unlock()
	switch {
	case r == nil:
		return compute.Observation{Reason: ReasonNotPrepared}, nil
	case snap.Stopped:
		return compute.Observation{Reason: ReasonStopped}, nil
	case snap.Staged && d.cfg.ProbeBeforeCutover:
		return d.observeProbe(ctx, r, snap), nil
	case snap.Staged:
		// Embedded preparation does not validate the replacement: it starts
		// (and checks its credentials) at activation (docs/design/seed-000.md#step-3).
		return compute.Observation{Ready: true, Reason: ReasonStaged, Staged: true}, nil
	}
	gwAddr := fmt.Sprintf("127.0.0.1:%d", snap.Ports.GatewayStatus)
	if snap.Topology == contract.DedicatedCodex {
		harAddr := fmt.Sprintf("127.0.0.1:%d", snap.Ports.HarnessStatus)
		if obs, done := observeOne(ctx, snap.Harness, harAddr, ReasonHarnessExited, ReasonHarnessNotReady); done {
			return obs, nil
		}
	}
	if obs, done := observeOne(ctx, snap.Gateway, gwAddr, ReasonGatewayExited, ReasonGatewayNotReady); done {
		return obs, nil
	}
	if snap.Topology == contract.DedicatedCodex && !snap.Enrolled {
		enrolled, err := d.advanceEnrollment(ctx, rev, r, gwAddr)
		if err != nil {
			d.log.Debug("enrollment pending", "revision", rev.ID, "error", err.Error())
		}
		if !enrolled {
			return compute.Observation{Reason: ReasonEnrolling}, nil
		}
	}
	return compute.Observation{Ready: true, Reason: ReasonReady}, nil
}

// observeOne reads one supervisor; done means obs is the final answer. The
// phase a starting supervisor runs now comes with a not-ready answer.
func observeOne(ctx context.Context, p *proc.Process, addr, exited, notReady string) (compute.Observation, bool) {
	rs, err := runtimeStatus(ctx, addr)
	if err == nil && rs.held != "" {
		return compute.Observation{Reason: ReasonHeld, HeldCode: rs.held, Cause: rs.cause, Phase: rs.check}, true
	}
	if !p.Alive() {
		return compute.Observation{Reason: exited}, true
	}
	ok, _, _ := status.ReadyCheck(ctx, addr)
	if !ok {
		return compute.Observation{Reason: notReady, Phase: rs.phase}, true
	}
	return compute.Observation{}, false
}

// supervisorStatus is what an observation reads from a supervisor's
// runtime status.
type supervisorStatus struct {
	held       codes.Code // a held failure's code ("" when none)
	cause      *codes.Cause
	check      string // the held failure's check
	phase      string // the startup phase running now
	passedAtMs int64  // a probe-only gatewayd's passed probe
}

// runtimeStatus reads the supervisor's runtime status.
func runtimeStatus(ctx context.Context, addr string) (supervisorStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, StatusTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+contract.RouteRuntimeStatus, nil)
	if err != nil {
		return supervisorStatus{}, err
	}
	res, err := httpClient.Do(req)
	if err != nil {
		return supervisorStatus{}, err
	}
	defer res.Body.Close()
	var doc struct {
		RuntimeFailure *status.RuntimeFailure     `json:"runtimeFailure"`
		Phase          string                     `json:"startupPhase"`
		Probe          *contract.ModelProbeStatus `json:"modelProbe"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&doc); err != nil {
		return supervisorStatus{}, err
	}
	out := supervisorStatus{phase: doc.Phase}
	if doc.Probe != nil && doc.Probe.Code == string(codes.Ready) {
		out.passedAtMs = doc.Probe.PassedAtMs
	}
	if f := doc.RuntimeFailure; f != nil {
		out.held, out.cause, out.check = f.Code, f.Cause, f.Check
		if !codes.IsRuntimeDiagnostic(out.held) {
			out.held = codes.Unavailable
		}
	}
	return out, nil
}

func (d *Driver) statusToken(r *revRuntime) (string, error) {
	b, err := os.ReadFile(filepath.Join(r.dir, "gateway", "secrets", contract.SecretStatusToken))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func statusCall(ctx context.Context, method, url, token string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, SetupCodeTimeout)
	defer cancel()
	var body io.Reader
	if method == http.MethodPost {
		body = bytes.NewReader([]byte("{}"))
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("local: %s %s: status %d", method, url[strings.LastIndex(url, "/"):], res.StatusCode)
	}
	return json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(out)
}

// advanceEnrollment observes the workspace node and, while none is
// connected, delivers a fresh one-use setup code when none is pending.
func (d *Driver) advanceEnrollment(ctx context.Context, rev state.Revision, r *revRuntime, gwAddr string) (bool, error) {
	token, err := d.statusToken(r)
	if err != nil {
		return false, err
	}
	var nodes contract.NodesResponse
	if err := statusCall(ctx, http.MethodGet, "http://"+gwAddr+contract.RouteNodes, token, &nodes); err != nil {
		return false, err
	}
	for _, n := range nodes.Nodes {
		if n.Connected && n.NodeID != "" {
			return d.nodeConnected(ctx, rev, r, n.NodeID)
		}
	}
	d.mu.Lock()
	pending := r.EnrollExpiresAtMs > now().UnixMilli()
	d.mu.Unlock()
	if pending {
		return false, nil
	}
	var sc contract.SetupCodeResponse
	if err := statusCall(ctx, http.MethodPost, "http://"+gwAddr+contract.RouteSetupCode, token, &sc); err != nil {
		return false, err
	}
	if sc.SetupCode == "" {
		return false, errors.New("local: empty setup code")
	}
	// One-use target, private to the Harness: mode 0600, atomic rename.
	if err := atomicfile.Write(enrollmentFile(r), []byte(sc.SetupCode), 0o600); err != nil {
		return false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	r.EnrollExpiresAtMs = sc.ExpiresAtMs
	if r.EnrollExpiresAtMs == 0 {
		r.EnrollExpiresAtMs = now().Add(SetupCodeTimeout).UnixMilli()
	}
	d.log.Info("enrollment delivered", "revision", r.RevisionID)
	return false, r.save()
}

// nodeConnected records the Agent's enrolled workspace node and, when the
// gateway runs without it pinned, restarts the gateway with
// OCE_WORKSPACE_NODE_ID (the node keeps its paired identity and
// reconnects); the revision is enrolled once the pinned gateway lists it.
func (d *Driver) nodeConnected(ctx context.Context, rev state.Revision, r *revRuntime, nodeID string) (bool, error) {
	d.mu.Lock()
	pinned := r.GatewayNodeID == nodeID
	d.mu.Unlock()
	if pinned {
		if d.workspaceNode(rev.NamespaceID, rev.AgentID) != nodeID {
			// the provisioned node: recorded as the Agent's now
			if err := d.setWorkspaceNode(rev.NamespaceID, rev.AgentID, nodeID); err != nil {
				return false, compute.Transient(codes.TransientDependency, err)
			}
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		r.Enrolled = true
		return true, r.save()
	}
	if err := d.setWorkspaceNode(rev.NamespaceID, rev.AgentID, nodeID); err != nil {
		return false, compute.Transient(codes.TransientDependency, err)
	}
	d.log.Info("workspace node enrolled; restarting the gateway pinned to it", "revision", r.RevisionID, "node", nodeID)
	if _, err := proc.Stop(ctx, r.Gateway, d.cfg.GatewayStopWait, d.cfg.LeftoverGrace, d.cfg.PollInterval); err != nil {
		return false, compute.Transient(codes.TransientDependency, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return false, d.startGateway(ctx, rev, r)
}
