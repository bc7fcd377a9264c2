package local

// The driver's record of each revision (run.json) and its ports.

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/atomicfile"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/proc"
)

// topologyOf is the revision's topology when the driver runs it.
func topologyOf(rev state.Revision) (contract.Topology, error) {
	switch t, _ := contract.Of(rev.Harness.ID, rev.Mode); t {
	case contract.Embedded, contract.DedicatedCodex:
		return t, nil
	}
	return "", compute.Permanent(codes.ComputeDriverMismatch, fmt.Errorf("%w: %s/%s", ErrUnsupported, rev.Harness.ID, rev.Mode))
}

// Ports are a revision's loopback ports.
type Ports struct {
	Gateway       int `json:"gateway"`
	GatewayStatus int `json:"gatewayStatus"`
	HarnessStatus int `json:"harnessStatus,omitempty"`
	AppServer     int `json:"appServer,omitempty"`
}

// revRuntime is the driver's record of one revision; run.json persists it
// so a restarted coordinator finds (and can stop) what it had started.
type revRuntime struct {
	RevisionID string            `json:"revisionId"`
	AgentID    string            `json:"agentId"`
	Topology   contract.Topology `json:"topology"`
	Ports      Ports             `json:"ports"`
	Gateway    *proc.Process     `json:"gateway,omitempty"`
	Harness    *proc.Process     `json:"harness,omitempty"`
	// Staged: an embedded replacement waiting for activation to take over
	// the Agent's gateway state (the Recreate cutover of docs/design/seed-000.md#step-3).
	Staged bool `json:"staged,omitempty"`
	// Probe is a staged replacement's probe-only gatewayd (the model probe
	// before cutover); ProbePassedAtMs is when its probe passed.
	Probe           *proc.Process `json:"probe,omitempty"`
	ProbePassedAtMs int64         `json:"probePassedAtMs,omitempty"`
	// Stopped: the driver stopped it and nothing started it since.
	Stopped bool `json:"stopped,omitempty"`
	// Stops counts stops that found it running; running again after one
	// means it came back (a lost claim's late write).
	Stops int `json:"stops,omitempty"`
	// Enrolled: the workspace node was observed connected.
	Enrolled bool `json:"enrolled,omitempty"`
	// EnrollExpiresAtMs: the delivered setup code's expiry (0: none yet).
	EnrollExpiresAtMs int64 `json:"enrollExpiresAtMs,omitempty"`
	// ProvisionedNodeID is the device id of the identity provisioned for
	// an Agent without a workspace node (nodeIdentityFile): the gateway
	// pins it from its first start.
	ProvisionedNodeID string `json:"provisionedNodeId,omitempty"`
	// GatewayNodeID is the OCE_WORKSPACE_NODE_ID the running gateway was
	// started with ("" before the Agent's node first enrolled).
	GatewayNodeID string `json:"gatewayNodeId,omitempty"`

	dir string
}

func (r *revRuntime) running() bool { return r.Gateway.Alive() || r.Harness.Alive() || r.Probe.Alive() }

func (r *revRuntime) save() error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(r.dir, fileRun), b, 0o600)
}

// lookup returns the revision's record from memory or its run.json.
func (d *Driver) lookup(rev state.Revision) *revRuntime {
	if r, ok := d.revs[rev.ID]; ok {
		return r
	}
	dir := d.RevisionDir(rev)
	b, err := os.ReadFile(filepath.Join(dir, fileRun))
	if err != nil {
		return nil
	}
	var r revRuntime
	if json.Unmarshal(b, &r) != nil || r.RevisionID != rev.ID {
		return nil
	}
	r.dir = dir
	d.revs[rev.ID] = &r
	return &r
}

// liveGatewayOf returns another revision of the Agent whose gateway runs.
func (d *Driver) liveGatewayOf(agentID, exceptRev string) *revRuntime {
	for id, r := range d.revs {
		if id != exceptRev && r.AgentID == agentID && r.Gateway.Alive() {
			return r
		}
	}
	return nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("local: allocate port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func freePorts(n int) ([]int, error) {
	// Hold every listener until all are chosen so the ports differ.
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	out := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("local: allocate port: %w", err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func enrollmentFile(r *revRuntime) string {
	return filepath.Join(r.dir, "harness", "enrollment", contract.EnrollmentFile)
}

// nodeIdentityFile is where a provisioned node identity is delivered to the
// Harness (contract.EnvNodehostIdentity), beside the enrollment file.
func nodeIdentityFile(r *revRuntime) string {
	return filepath.Join(r.dir, "harness", "enrollment", contract.NodeIdentityFile)
}

// now is the clock of enrollment expiry checks.
var now = time.Now
