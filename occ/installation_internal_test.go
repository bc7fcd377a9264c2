package occ

import (
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
)

func TestInstallationTable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		inst    wire.Installation
		rows    [][]string
		trailer string
	}{
		{"every runtime the driver runs, with its methods",
			wire.Installation{Capabilities: wire.Capabilities{
				OpenClaw: wire.OpenClawCapabilities{ExecutionModes: []string{"embedded"}},
				Runtimes: []wire.RuntimeCapability{
					{Harness: "openclaw", Mode: "embedded", HarnessAuth: []string{"api_key"}},
					{Harness: "codex", Mode: "dedicated", HarnessAuth: []string{"api_key", "codex_pat"}}}},
				Compute: &wire.Compute{Driver: "kubernetes", HarnessAuth: []string{"api_key", "codex_pat"}}},
			[][]string{{"embedded OpenClaw", "openclaw", "embedded", "kubernetes", "api_key"},
				{"dedicated Codex", "codex", "dedicated", "kubernetes", "api_key,codex_pat"}}, ""},
		{"an older coordinator: its OpenClaw modes; native workers and an outage below",
			wire.Installation{Capabilities: wire.Capabilities{
				OpenClaw:      wire.OpenClawCapabilities{ExecutionModes: []string{"embedded", "dedicated"}},
				NativeWorkers: &wire.NativeWorkers{Support: "pinned-runtime"}}, SandboxDriverUnavailable: true},
			[][]string{{"embedded OpenClaw", "openclaw", "embedded", "-", "-"},
				{"dedicated OpenClaw", "openclaw", "dedicated", "-", "-"}},
			"Native workers: pinned-runtime\nSandbox driver: unavailable (dedicated OpenClaw cannot deploy until it is back)\n"},
		{"nothing runs", wire.Installation{Capabilities: wire.Capabilities{Runtimes: []wire.RuntimeCapability{}}}, nil,
			"No runtime: this installation's compute driver runs no Agent.\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := installationTable(tc.inst)
			require.Equal(t, tc.rows, tb.rows)
			require.Equal(t, tc.trailer, tb.trailer)
		})
	}
}
