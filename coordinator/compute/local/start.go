package local

// Starting the supervisors: the runtime contract rendered as environments.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/runtimes"
)

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

// providerEnv renders the offline endpoint overrides
// (contract.ProviderEndpoints).
func (d *Driver) providerEnv(harness bool) []string {
	var env []string
	for _, e := range contract.ProviderEndpoints(d.cfg.ProviderBaseURLs, harness) {
		env = append(env, kv(e.Name, e.Value))
	}
	return env
}

func gatewayURL(port int) string { return fmt.Sprintf("ws://127.0.0.1:%d", port) }

// kv is one environment entry.
func kv(name, value string) string { return name + "=" + value }

func (d *Driver) startGateway(_ context.Context, rev state.Revision, r *revRuntime) error {
	env, node := d.gatewayEnv(rev, r)
	if at := d.probeVouch(r); at != "" {
		env = append(env, kv(contract.EnvModelProbePassedAt, at))
	}
	p, err := startProc(d.cfg.Runtimes.Tini, "gateway", []string{d.cfg.Binaries.Gatewayd}, env, filepath.Join(r.dir, "gateway"),
		filepath.Join(r.dir, "gateway.log"))
	if err != nil {
		return compute.Transient(codes.TransientDependency, err)
	}
	r.Gateway, r.Staged, r.GatewayNodeID = p, false, node
	d.log.Info("gateway started", "revision", rev.ID, "pid", p.PID, "port", r.Ports.Gateway, "workspaceNode", node)
	return r.save()
}

// gatewayEnv is the gateway supervisor's environment (the runtime
// contract) and the workspace node it pins ("" when none).
func (d *Driver) gatewayEnv(rev state.Revision, r *revRuntime) ([]string, string) {
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
	if cc := compileCacheDir(); cc != "" {
		// one Node compile cache for every gateway, probe and doctor of
		// this host, filled by the first of them (issue 23)
		env = append(env, kv(contract.EnvCompileCache, cc))
	}
	node := ""
	if r.Topology == contract.Embedded {
		env = append(env, kv(contract.EnvWorkspaceDir, d.GatewayWorkspace(rev.NamespaceID, rev.AgentID)))
	} else {
		// Once the Agent's workspace node enrolled, the gateway pins it:
		// it renders the node command allow-list and file-transfer policy.
		if node = d.workspaceNode(rev.NamespaceID, rev.AgentID); node == "" {
			node = r.ProvisionedNodeID
		}
		if node != "" {
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
	return env, node
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
		kv(contract.EnvNodehostIdentity, nodeIdentityFile(r)),
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

// compileCacheDir is the host's shared Node compile cache beside the pinned
// runtimes (created here; "" when it cannot be): gatewayd links it as the
// OpenClaw launcher's default base.
func compileCacheDir() string {
	dir := filepath.Join(runtimes.CacheDir(), "compile-cache")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ""
	}
	return dir
}
