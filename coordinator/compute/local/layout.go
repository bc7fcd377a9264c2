package local

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/atomicfile"
	"oce.dev/oce/shared/codes"
)

// Directory layout under Config.DataDir:
//
//	runtimes/<ns>/<agent>/gateway-state/      Agent claim: gateway state (+ embedded workspace)
//	runtimes/<ns>/<agent>/harness-workspace/  Agent claim: dedicated Harness workspace + Codex home
//	runtimes/<ns>/<agent>/gateway-password    the Agent's managed gateway password (0600)
//	runtimes/<ns>/<agent>/revisions/<rev>/    what one revision owns: secrets, config, tmp, logs, run.json
//	routes/<agent>.json, routes/<agent12>.sock  the Agent's stable endpoint
//
// Every directory is 0700, every secret 0600.
const (
	dirRuntimes  = "runtimes"
	dirRoutes    = "routes"
	dirRevisions = "revisions"
	dirGwClaim   = "gateway-state"
	dirHarClaim  = "harness-workspace"
	fileRun      = "run.json"
)

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,63}$`)

func checkIDs(ids ...string) error {
	for _, id := range ids {
		if !idPattern.MatchString(id) {
			return compute.Permanent(codes.InvalidTarget, fmt.Errorf("%w: id %q", ErrInvalidTarget, id))
		}
	}
	return nil
}

func (d *Driver) nsDir(nsID string) string {
	return filepath.Join(d.cfg.DataDir, dirRuntimes, nsID)
}

// AgentDir is the directory of everything the driver keeps for an Agent.
func (d *Driver) AgentDir(nsID, agentID string) string {
	return filepath.Join(d.nsDir(nsID), agentID)
}

// RevisionDir is the directory a revision owns.
func (d *Driver) RevisionDir(rev state.Revision) string {
	return filepath.Join(d.AgentDir(rev.NamespaceID, rev.AgentID), dirRevisions, rev.ID)
}

// GatewayWorkspace is the embedded Agent workspace (on the gateway claim).
func (d *Driver) GatewayWorkspace(nsID, agentID string) string {
	return filepath.Join(d.AgentDir(nsID, agentID), dirGwClaim, "workspace")
}

// HarnessWorkspace is the dedicated Harness workspace (on the Harness claim).
func (d *Driver) HarnessWorkspace(nsID, agentID string) string {
	return filepath.Join(d.AgentDir(nsID, agentID), dirHarClaim, "workspace")
}

func mkdirs(paths ...string) error {
	for _, p := range paths {
		if err := os.MkdirAll(p, 0o700); err != nil {
			return fmt.Errorf("local: mkdir: %w", err)
		}
		if err := os.Chmod(p, 0o700); err != nil {
			return fmt.Errorf("local: chmod: %w", err)
		}
	}
	return nil
}

// writeSecret writes one secret file with mode 0600.
func writeSecret(dir, name string, v []byte) error {
	if err := atomicfile.Write(filepath.Join(dir, name), v, 0o600); err != nil {
		return fmt.Errorf("local: write secret %s: %w", name, err)
	}
	return nil
}

// loadOrCreateSecret returns the secret at path, creating a random one.
func loadOrCreateSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil && len(b) > 0 {
		return b, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("local: read secret: %w", err)
	}
	v := []byte(randomHex(24))
	if err := atomicfile.Write(path, v, 0o600); err != nil {
		return nil, fmt.Errorf("local: write secret: %w", err)
	}
	return v, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// workspaceNodeFile records the Agent's enrolled workspace node id beside
// its claims: the node's identity lives on the Harness claim, so later
// revisions start their gateway pinned to it at once.
func (d *Driver) workspaceNodeFile(nsID, agentID string) string {
	return filepath.Join(d.AgentDir(nsID, agentID), "workspace-node-id")
}

// workspaceNode is the Agent's recorded workspace node ("" when none).
func (d *Driver) workspaceNode(nsID, agentID string) string {
	b, err := os.ReadFile(d.workspaceNodeFile(nsID, agentID))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func (d *Driver) setWorkspaceNode(nsID, agentID, nodeID string) error {
	return atomicfile.Write(d.workspaceNodeFile(nsID, agentID), []byte(nodeID+"\n"), 0o600)
}
