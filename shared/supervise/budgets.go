package supervise

import "time"

// Stop budgets: how long a child's process group may take to exit after the
// stop signal before it is killed with SIGKILL. The numbers are the
// reference's (docs/design/reference.md#s5-1, #s5-2, #s1-6).
const (
	// GatewayDrain is the time the OpenClaw gateway gets to drain its work.
	GatewayDrain = 315 * time.Second
	// GatewayCleanup is the time for the gateway's cleanup after the drain.
	GatewayCleanup = 10 * time.Second
	// GatewayMargin is the safety margin on top of drain and cleanup.
	GatewayMargin = 5 * time.Second
	// GatewayStopBudget is the pinned runtime's 330 s service stop budget
	// (the Gateway pod's terminationGracePeriodSeconds).
	GatewayStopBudget = GatewayDrain + GatewayCleanup + GatewayMargin
	// CodexStopBudget bounds the stop of codex app-server.
	CodexStopBudget = 8 * time.Second
	// NativeWorkerStopBudget bounds the stop of a native OpenClaw worker.
	NativeWorkerStopBudget = 8 * time.Second
	// WorkspaceNodeStopBudget bounds the stop of the workspace-node
	// supervisor's slots (the reference then exits 1).
	WorkspaceNodeStopBudget = 9 * time.Second
)

// OutputDrainBudget bounds how long a finished child's captured output is
// still copied (the reference waits at most 2 s to drain Codex stderr); a
// grandchild that escaped the group and holds the pipe cannot block Wait.
const OutputDrainBudget = 2 * time.Second

// DefaultOutputLimit is RunCommand's per-stream output cap (the probes' 256
// KiB); a child writing more is killed.
const DefaultOutputLimit = 256 << 10
