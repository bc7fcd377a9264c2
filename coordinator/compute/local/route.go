package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/atomicfile"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/relay"
)

// Route is the Agent's stable gateway endpoint as `occ agent send` reads it
// from <DataDir>/routes/<agent>.json: a Unix socket the driver forwards to
// the active revision's loopback gateway port. A Unix socket is reachable
// from outside the runtimes' network namespace, a loopback port is not.
type Route struct {
	AgentID      string `json:"agentId"`
	RevisionID   string `json:"revisionId"`
	Socket       string `json:"socket"`
	PasswordFile string `json:"passwordFile"`
	// GatewayPort is the loopback port inside the namespace (for callers
	// that share it, such as the end-to-end tests).
	GatewayPort int `json:"gatewayPort"`
}

// RoutePath is where the route record of an Agent lives under dataDir.
func RoutePath(dataDir, agentID string) string {
	return filepath.Join(dataDir, dirRoutes, agentID+".json")
}

// ReadRoute reads an Agent's route record.
func ReadRoute(dataDir, agentID string) (Route, error) {
	var r Route
	b, err := os.ReadFile(RoutePath(dataDir, agentID))
	if err != nil {
		return r, fmt.Errorf("local: agent %s has no local gateway route (not active on the local driver?): %w", agentID, err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("local: route record: %w", err)
	}
	return r, nil
}

// route forwards connections on the Agent's socket to the active gateway.
type route struct {
	mu     sync.Mutex
	ln     net.Listener
	rev    string
	port   int
	closed bool
}

func (rt *route) revisionID() string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.rev
}

func (rt *route) target() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.port
}

func (rt *route) close() {
	rt.mu.Lock()
	rt.closed = true
	rt.mu.Unlock()
	_ = rt.ln.Close()
}

func (rt *route) serve() {
	_ = relay.Serve(rt.ln, func() (net.Conn, error) {
		return net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", rt.target()))
	})
}

func (d *Driver) socketPath(agentID string) string {
	a := agentID
	if len(a) > 16 {
		a = a[:16]
	}
	return filepath.Join(d.cfg.DataDir, dirRoutes, a+".sock")
}

// setRoute points the Agent's endpoint at r's gateway; d.mu is held.
func (d *Driver) setRoute(rev state.Revision, r *revRuntime) error {
	if err := mkdirs(filepath.Join(d.cfg.DataDir, dirRoutes)); err != nil {
		return compute.Transient(codes.TransientDependency, err)
	}
	rt, ok := d.routes[rev.AgentID]
	if !ok {
		sock := d.socketPath(rev.AgentID)
		_ = os.Remove(sock)
		ln, err := net.Listen("unix", sock)
		if err != nil {
			return compute.Transient(codes.TransientDependency, fmt.Errorf("local: route socket: %w", err))
		}
		_ = os.Chmod(sock, 0o600)
		rt = &route{ln: ln}
		d.routes[rev.AgentID] = rt
		go rt.serve()
	}
	rt.mu.Lock()
	rt.rev, rt.port = rev.ID, r.Ports.Gateway
	rt.mu.Unlock()
	rec := Route{AgentID: rev.AgentID, RevisionID: rev.ID, Socket: d.socketPath(rev.AgentID),
		PasswordFile: filepath.Join(d.AgentDir(rev.NamespaceID, rev.AgentID), contract.SecretGatewayPassword),
		GatewayPort:  r.Ports.Gateway}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(RoutePath(d.cfg.DataDir, rev.AgentID), b, 0o600); err != nil {
		return compute.Transient(codes.TransientDependency, err)
	}
	return nil
}

// dropRoute removes the Agent's endpoint; d.mu is held.
func (d *Driver) dropRoute(agentID string) {
	if rt, ok := d.routes[agentID]; ok {
		rt.close()
		delete(d.routes, agentID)
	}
	_ = os.Remove(d.socketPath(agentID))
	if err := os.Remove(RoutePath(d.cfg.DataDir, agentID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		d.log.Warn("route record not removed", "agent", agentID, "error", err.Error())
	}
}

// restoreRoutes serves the route records a previous coordinator process
// left, so active Agents stay reachable across a coordinator restart.
func (d *Driver) restoreRoutes() {
	entries, err := os.ReadDir(filepath.Join(d.cfg.DataDir, dirRoutes))
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if filepath.Ext(name) != ".json" {
			continue
		}
		rec, err := ReadRoute(d.cfg.DataDir, name[:len(name)-len(".json")])
		if err != nil || rec.AgentID == "" || checkIDs(rec.AgentID) != nil {
			continue
		}
		_ = os.Remove(rec.Socket)
		ln, err := net.Listen("unix", d.socketPath(rec.AgentID))
		if err != nil {
			d.log.Warn("route not restored", "agent", rec.AgentID, "error", err.Error())
			continue
		}
		rt := &route{ln: ln, rev: rec.RevisionID, port: rec.GatewayPort}
		d.routes[rec.AgentID] = rt
		go rt.serve()
	}
}

// Endpoints implements compute.Endpointer from the Agent's route record:
// the Unix socket and the password file live on this machine.
func (d *Driver) Endpoints(_ context.Context, agent state.Agent) (compute.Endpoints, error) {
	if err := checkIDs(agent.ID); err != nil {
		return compute.Endpoints{}, err
	}
	rec, err := ReadRoute(d.cfg.DataDir, agent.ID)
	if err != nil {
		return compute.Endpoints{}, fmt.Errorf("%w: %v", compute.ErrNoEndpoint, err)
	}
	return compute.Endpoints{RevisionID: rec.RevisionID, Gateway: gatewayURL(rec.GatewayPort), Socket: rec.Socket,
		PasswordFile: rec.PasswordFile}, nil
}
