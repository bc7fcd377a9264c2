package api

import (
	"net/http"
	"slices"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

// installation reports the capabilities of docs/design/seed-001.md: the OpenClaw execution
// modes an Agent can deploy in (embedded always; dedicated only with a
// qualifying SandboxDriver and native-worker support), nativeWorkers only
// with a qualifying SandboxDriver, and sandboxDriverUnavailable during a
// Driver outage.
func (s *server) installation(w http.ResponseWriter, r *http.Request) error {
	if err := s.allow(r, iam.ViewInstallation, iam.ClusterRes(), ""); err != nil {
		return err
	}
	inst := s.b.Machine().Installation()
	writeJSON(w, http.StatusOK, s.describeInstallation(inst))
	return nil
}

func (s *server) describeInstallation(inst state.Installation) wire.Installation {
	d := s.driverInfo()
	out := wire.Installation{Capabilities: wire.Capabilities{
		OpenClaw: wire.OpenClawCapabilities{ExecutionModes: []string{}},
	}}
	if d.supports(state.HarnessOpenClaw, state.ModeEmbedded) {
		out.Capabilities.OpenClaw.ExecutionModes = append(out.Capabilities.OpenClaw.ExecutionModes, state.ModeEmbedded)
	}
	// Dedicated native OpenClaw needs a qualifying SandboxDriver (docs/design/seed-001.md);
	// without one nativeWorkers is omitted.
	if inst.SandboxDriver != "" {
		if inst.NativeWorkerSupport != "" {
			out.Capabilities.NativeWorkers = &wire.NativeWorkers{Support: inst.NativeWorkerSupport}
			if d.supports(state.HarnessOpenClaw, state.ModeDedicated) {
				out.Capabilities.OpenClaw.ExecutionModes = append(out.Capabilities.OpenClaw.ExecutionModes, state.ModeDedicated)
			}
		}
	}
	// Runtimes: what the driver runs, with dedicated OpenClaw only where
	// it is listed above (it needs the SandboxDriver too).
	out.Capabilities.Runtimes = []wire.RuntimeCapability{}
	for _, t := range contract.Topologies() {
		switch {
		case !d.supports(t.Harness(), t.Mode()):
			continue
		case t == contract.DedicatedOpenClaw && !slices.Contains(out.Capabilities.OpenClaw.ExecutionModes, state.ModeDedicated):
			continue
		}
		rc := wire.RuntimeCapability{Harness: t.Harness(), Mode: t.Mode()}
		if d.present {
			rc.HarnessAuth = slices.Sorted(slices.Values(d.caps.Topologies[t]))
		}
		out.Capabilities.Runtimes = append(out.Capabilities.Runtimes, rc)
	}
	out.SandboxDriverUnavailable = d.sandboxUnavailable
	if d.present {
		out.Compute = &wire.Compute{Driver: d.caps.Name, HarnessAuth: d.authMethods()}
	}
	return out
}

// admissionInput gathers what admission reads for one deploy.
func (s *server) admissionInput(a state.Agent, cfg state.Configuration, inst state.Installation, logLevel string) admission.Input {
	d := s.driverInfo()
	return admission.Input{Agent: a, Configuration: cfg, Installation: inst, Auth: d.auth(),
		HarnessVersions: s.versions, LogLevel: logLevel}
}
