package admission

import (
	"oce.dev/oce/coordinator/state"
)

// Topology is a (Harness, execution mode) pair.
type Topology struct {
	Harness string // state.HarnessOpenClaw | state.HarnessCodex
	Mode    string // state.ModeEmbedded | state.ModeDedicated
}

// Topologies admission can approve.
var (
	EmbeddedOpenClaw  = Topology{state.HarnessOpenClaw, state.ModeEmbedded}
	DedicatedOpenClaw = Topology{state.HarnessOpenClaw, state.ModeDedicated}
	DedicatedCodex    = Topology{state.HarnessCodex, state.ModeDedicated}
)

// checkTopology enforces the allowed (Harness, mode) pairs of seed 001.
func checkTopology(t Topology, inst state.Installation) error {
	switch t.Mode {
	case state.ModeEmbedded, state.ModeDedicated:
	default:
		return invalid(RuleExecutionMode, "the Agent execution mode %s is unsupported: use embedded or dedicated", quote(t.Mode)).with("path", "executionMode")
	}
	switch t {
	case EmbeddedOpenClaw, DedicatedCodex:
		return nil
	case DedicatedOpenClaw:
		if inst.NativeWorkerSupport == "" {
			return invalid(RuleNativeWorkers, "dedicated OpenClaw needs native-worker support, which the runtime image does not declare (runtime.nativeWorkerSupport)")
		}
		if inst.SandboxDriver == "" {
			return conflict(RuleSandboxDriver, "dedicated OpenClaw needs a qualifying SandboxDriver with networking, filesystem and process containment; none is selected").with("missingDriver", "SandboxDriver")
		}
		return nil
	}
	// Codex in embedded mode: Codex runs only as a dedicated Harness.
	return conflict(RuleModeMismatch, "mode mismatch: the model policy selects the Codex Harness, which runs only in dedicated mode, but the Agent's execution mode is embedded").
		with("harness", t.Harness).with("mode", t.Mode)
}
