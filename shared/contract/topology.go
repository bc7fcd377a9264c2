package contract

import "fmt"

// Harness ids and execution modes as the coordinator's Agents and revisions
// name them.
const (
	HarnessOpenClaw = "openclaw"
	HarnessCodex    = "codex"

	ModeEmbedded  = "embedded"
	ModeDedicated = "dedicated"
)

// Topology is an admitted (harness, execution mode) pair: what a driver
// realizes and what OCE_TOPOLOGY tells the Gateway container.
type Topology string

// The topologies admission can approve (docs/design/seed-001.md). Codex never runs
// embedded.
const (
	Embedded          Topology = "embedded"           // OpenClaw with its built-in Harness, one workload
	DedicatedCodex    Topology = "dedicated-codex"    // Gateway + Codex Harness (harnessd, nodehost)
	DedicatedOpenClaw Topology = "dedicated-openclaw" // Gateway + native OpenClaw workers (needs a SandboxDriver)
)

var pairs = map[Topology][2]string{
	Embedded:          {HarnessOpenClaw, ModeEmbedded},
	DedicatedCodex:    {HarnessCodex, ModeDedicated},
	DedicatedOpenClaw: {HarnessOpenClaw, ModeDedicated},
}

// Topologies lists every topology, in a fixed order.
func Topologies() []Topology { return []Topology{Embedded, DedicatedCodex, DedicatedOpenClaw} }

// Of returns the topology of (harness, mode); false for a pair no topology
// has (Codex embedded, unknown ids).
func Of(harness, mode string) (Topology, bool) {
	for t, p := range pairs {
		if p == [2]string{harness, mode} {
			return t, true
		}
	}
	return "", false
}

// ParseTopology reads an OCE_TOPOLOGY value.
func ParseTopology(s string) (Topology, error) {
	t := Topology(s)
	if !t.Valid() {
		return "", fmt.Errorf("contract: %s must be embedded, dedicated-codex or dedicated-openclaw, not %q", EnvTopology, s)
	}
	return t, nil
}

// Valid reports whether t is one of the topologies.
func (t Topology) Valid() bool { _, ok := pairs[t]; return ok }

// Harness is the harness id of t ("" when t is not valid).
func (t Topology) Harness() string { return pairs[t][0] }

// Mode is the execution mode of t ("" when t is not valid).
func (t Topology) Mode() string { return pairs[t][1] }

// Dedicated reports a Gateway whose Harness runs in a workload of its own.
func (t Topology) Dedicated() bool { return t.Mode() == ModeDedicated }
