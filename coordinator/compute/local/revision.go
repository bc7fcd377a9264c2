package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/atomicfile"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/proc"
	"oce.dev/oce/shared/runtimes"
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
	// the Agent's gateway state (the Recreate cutover of seed 000 step 3).
	Staged bool `json:"staged,omitempty"`
	// Stopped: the driver stopped it and nothing started it since.
	Stopped bool `json:"stopped,omitempty"`
	// Stops counts stops that found it running; running again after one
	// means it came back (a lost claim's late write).
	Stops int `json:"stops,omitempty"`
	// Enrolled: the workspace node was observed connected.
	Enrolled bool `json:"enrolled,omitempty"`
	// EnrollExpiresAtMs: the delivered setup code's expiry (0: none yet).
	EnrollExpiresAtMs int64 `json:"enrollExpiresAtMs,omitempty"`
	// GatewayNodeID is the OCE_WORKSPACE_NODE_ID the running gateway was
	// started with ("" before the Agent's node first enrolled).
	GatewayNodeID string `json:"gatewayNodeId,omitempty"`

	dir string
}

func (r *revRuntime) running() bool { return r.Gateway.Alive() || r.Harness.Alive() }

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

// EnsureNamespace implements compute.Driver.
func (d *Driver) EnsureNamespace(_ context.Context, ns state.Namespace) error {
	if err := checkIDs(ns.ID); err != nil {
		return err
	}
	return mkdirs(filepath.Join(d.cfg.DataDir, dirRuntimes), d.nsDir(ns.ID))
}

// DeleteNamespace implements compute.Driver: the Namespace's directory goes
// once no Agent directory is left in it.
func (d *Driver) DeleteNamespace(_ context.Context, ns state.Namespace) error {
	if err := checkIDs(ns.ID); err != nil {
		return err
	}
	entries, err := os.ReadDir(d.nsDir(ns.ID))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return compute.Transient(codes.TransientDependency, err)
	}
	if len(entries) > 0 {
		return compute.Transient(codes.NamespaceNotEmpty, errors.New("local: namespace still holds Agent runtimes"))
	}
	return os.Remove(d.nsDir(ns.ID))
}

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
			return d.startGateway(ctx, rev, r)
		case r.Staged, r.Gateway.Alive() || topo == contract.DedicatedCodex && r.Harness.Alive():
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
	r.Stopped, r.Enrolled, r.EnrollExpiresAtMs = false, false, 0
	if err := d.materialize(ctx, rev, r); err != nil {
		return err
	}
	d.revs[rev.ID] = r
	if topo == contract.DedicatedCodex && !r.Harness.Alive() {
		if err := d.startHarness(rev, r); err != nil {
			return err
		}
	}
	if topo == contract.Embedded && d.liveGatewayOf(rev.AgentID, rev.ID) != nil {
		r.Staged = true
		return r.save()
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

// baseEnv is what every supervisor gets: never this process's whole
// environment (it may hold a provider key).
func (d *Driver) baseEnv(rev state.Revision, dir string, statusPort int) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + filepath.Join(dir, "home"),
		"XDG_CACHE_HOME=" + filepath.Dir(runtimes.CacheDir()),
		kv(contract.EnvTmpDir, filepath.Join(dir, "tmp")),
		kv(contract.EnvNamespaceID, rev.NamespaceID), kv(contract.EnvAgentID, rev.AgentID), kv(contract.EnvRevisionID, rev.ID),
		kv(contract.EnvStatusAddr, fmt.Sprintf("127.0.0.1:%d", statusPort)),
		kv(contract.EnvSecretsDir, filepath.Join(dir, "secrets")),
		kv(contract.EnvLogLevel, d.cfg.LogLevel),
		kv(contract.EnvPlugins, strings.Join(rev.Plugins, ",")),
	}
	if v := os.Getenv("LANG"); v != "" {
		env = append(env, "LANG="+v)
	}
	return append(env, d.cfg.Env...)
}

// providerEnv renders the offline endpoint overrides (compute.ProviderBaseEnv).
func (d *Driver) providerEnv(harness bool) []string {
	var env []string
	for _, e := range compute.ProviderBaseEnv(d.cfg.ProviderBaseURLs, harness) {
		env = append(env, kv(e[0], e[1]))
	}
	return env
}

func gatewayURL(port int) string { return fmt.Sprintf("ws://127.0.0.1:%d", port) }

// kv is one environment entry.
func kv(name, value string) string { return name + "=" + value }

func (d *Driver) startGateway(_ context.Context, rev state.Revision, r *revRuntime) error {
	gw := filepath.Join(r.dir, "gateway")
	agent := d.AgentDir(rev.NamespaceID, rev.AgentID)
	env := append(d.baseEnv(rev, gw, r.Ports.GatewayStatus),
		kv(contract.EnvStatusTokenFile, filepath.Join(gw, "secrets", contract.SecretStatusToken)),
		kv(contract.EnvTopology, string(r.Topology)),
		kv(contract.EnvAdmittedConfig, filepath.Join(gw, "config", "openclaw.json")),
		kv(contract.EnvGatewayConfigDir, filepath.Join(agent, dirGwClaim, "state", "config")),
		kv(contract.EnvOpenClawStateDir, filepath.Join(agent, dirGwClaim, "state")),
		kv(contract.EnvGatewayPort, fmt.Sprint(r.Ports.Gateway)),
		kv(contract.EnvGatewayBind, contract.BindLoopback),
		kv(contract.EnvGatewayPublicURL, gatewayURL(r.Ports.Gateway)),
		kv(contract.EnvRuntimeAssetsDir, filepath.Join(gw, "home", "openclaw-runtime-assets", "bundled-skills")),
		kv(contract.EnvSkipChannels, "1"),
	)
	env = append(env, d.providerEnv(false)...)
	if src := d.assetsSource(); src != "" {
		env = append(env, kv(contract.EnvRuntimeAssetsSrc, src))
	}
	if d.cfg.Runtimes.Node != "" && d.cfg.Runtimes.OpenClawMJS != "" {
		env = append(env, kv(contract.EnvOpenClawBin, d.cfg.Runtimes.Node+" "+d.cfg.Runtimes.OpenClawMJS))
	}
	node := ""
	if r.Topology == contract.Embedded {
		env = append(env, kv(contract.EnvWorkspaceDir, d.GatewayWorkspace(rev.NamespaceID, rev.AgentID)))
	} else {
		// Once the Agent's workspace node enrolled, the gateway pins it:
		// it renders the node command allow-list and file-transfer policy.
		if node = d.workspaceNode(rev.NamespaceID, rev.AgentID); node != "" {
			env = append(env, kv(contract.EnvWorkspaceNodeID, node))
		}
		env = append(env,
			kv(contract.EnvPeerStatusURL, contract.PeerStatusURL("127.0.0.1", r.Ports.HarnessStatus)),
			kv(contract.EnvAppServerURL, contract.AppServerURL("127.0.0.1", r.Ports.AppServer)),
			kv(contract.EnvNodeWorkspaceDir, d.HarnessWorkspace(rev.NamespaceID, rev.AgentID)),
		)
		if r.Topology == contract.DedicatedCodex && d.cfg.Runtimes.NPMCache != "" {
			// gatewayd installs the codex plugin offline from it
			env = append(env, kv(contract.EnvNPMCache, d.cfg.Runtimes.NPMCache))
		}
	}
	p, err := startProc(d.cfg.Runtimes.Tini, "gateway", []string{d.cfg.Binaries.Gatewayd}, env, gw,
		filepath.Join(r.dir, "gateway.log"))
	if err != nil {
		return compute.Transient(codes.TransientDependency, err)
	}
	r.Gateway, r.Staged, r.GatewayNodeID = p, false, node
	d.log.Info("gateway started", "revision", rev.ID, "pid", p.PID, "port", r.Ports.Gateway, "workspaceNode", node)
	return r.save()
}

// assetsSource is the bundled skills directory of the installed openclaw.
func (d *Driver) assetsSource() string {
	if d.cfg.Runtimes.OpenClawMJS == "" {
		return ""
	}
	p := filepath.Join(filepath.Dir(d.cfg.Runtimes.OpenClawMJS), "skills")
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		return p
	}
	return ""
}

func (d *Driver) startHarness(rev state.Revision, r *revRuntime) error {
	h := filepath.Join(r.dir, "harness")
	agent := d.AgentDir(rev.NamespaceID, rev.AgentID)
	login := contract.LoginAPIKey
	if a := rev.HarnessAuth; a != nil && a.Method != "" {
		login = a.Method
	}
	env := append(d.baseEnv(rev, h, r.Ports.HarnessStatus),
		kv(contract.EnvCodexLoginMode, login),
		kv(contract.EnvCodexHome, filepath.Join(h, "home", ".codex")), // the revision's private home: login state
		kv(contract.EnvCodexStateDir, filepath.Join(agent, dirHarClaim, contract.ClaimCodexState)),
		kv(contract.EnvWorkspaceDir, d.HarnessWorkspace(rev.NamespaceID, rev.AgentID)),
		kv(contract.EnvNativeConfig, filepath.Join(h, "native-config.json")),
		kv(contract.EnvAppServerPort, fmt.Sprint(r.Ports.AppServer)),
		kv(contract.EnvAppServerBind, contract.AppServerBindLoopback),
		kv(contract.EnvPodUID, rev.ID),
		kv(contract.EnvNodehostBin, d.cfg.Binaries.Nodehost),
		kv(contract.EnvNodehostStateDir, filepath.Join(agent, dirHarClaim, contract.ClaimNodeState)),
		kv(contract.EnvNodehostEnrollment, enrollmentFile(r)),
		kv(contract.EnvNodehostGatewayURL, gatewayURL(r.Ports.Gateway)),
	)
	env = append(env, d.providerEnv(true)...)
	if d.cfg.Runtimes.Codex != "" {
		env = append(env, kv(contract.EnvCodexBin, d.cfg.Runtimes.Codex))
	}
	p, err := startProc(d.cfg.Runtimes.Tini, "harness", []string{d.cfg.Binaries.Harnessd}, env, h,
		filepath.Join(r.dir, "harness.log"))
	if err != nil {
		return compute.Transient(codes.TransientDependency, err)
	}
	r.Harness = p
	d.log.Info("harness started", "revision", rev.ID, "pid", p.PID)
	return r.save()
}

func enrollmentFile(r *revRuntime) string {
	return filepath.Join(r.dir, "harness", "enrollment", contract.EnrollmentFile)
}

// ActivateRevision implements compute.Driver: a staged embedded replacement
// takes over now (the serving gateway stops first, seed 000 step 3), and
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
	d.mu.Lock()
	defer d.mu.Unlock()
	if r.Staged || !r.Gateway.Alive() {
		if err := d.startGateway(ctx, rev, r); err != nil {
			return err
		}
	}
	return d.setRoute(rev, r)
}

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
	return compute.StopResult{Stopped: true, CameBack: cameBack}, nil
}

// RetireRevision implements compute.Driver: the revision's processes stop
// and its own directory goes; the Agent's claims (gateway state, Harness
// workspace) and password stay (seed 000 step 3).
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

// now is the clock of enrollment expiry checks.
var now = time.Now

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
