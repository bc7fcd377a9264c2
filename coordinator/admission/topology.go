package admission

import (
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

// checkTopology enforces the allowed (Harness, mode) pairs of docs/design/seed-001.md and
// returns the admitted topology.
func checkTopology(harness, mode string, inst state.Installation) (contract.Topology, error) {
	switch mode {
	case state.ModeEmbedded, state.ModeDedicated:
	default:
		return "", invalid(RuleExecutionMode, "the Agent execution mode %s is unsupported: use embedded or dedicated", quote(mode)).with("path", "executionMode")
	}
	t, ok := contract.Of(harness, mode)
	if !ok {
		// Codex in embedded mode: Codex runs only as a dedicated Harness.
		return "", conflict(RuleModeMismatch, "mode mismatch: the model policy selects the Codex Harness, which runs only in dedicated mode, but the Agent's execution mode is embedded").
			with("harness", harness).with("mode", mode)
	}
	if t == contract.DedicatedOpenClaw {
		if inst.NativeWorkerSupport == "" {
			return "", invalid(RuleNativeWorkers, "dedicated OpenClaw needs native-worker support, which the runtime image does not declare (runtime.nativeWorkerSupport)")
		}
		if inst.SandboxDriver == "" {
			return "", conflict(RuleSandboxDriver, "dedicated OpenClaw needs a qualifying SandboxDriver with networking, filesystem and process containment; none is selected").with("missingDriver", "SandboxDriver")
		}
	}
	return t, nil
}
