package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/server"
)

func TestFlagDefaultsAndEnv(t *testing.T) {
	cmd := command()
	for flag, want := range map[string]string{
		"data-dir": server.DefaultDataDir, "raft-addr": server.DefaultRaftAddr, "http-addr": server.DefaultHTTPAddr,
		"driver": "", "join": "", "api-socket": "", "local-root": "", "node-id": "", "raft-heartbeat-timeout": "400ms", "raft-leader-lease-timeout": "200ms",
		"rate-limit-principal": "50", "rate-limit-principal-burst": "200", "rate-limit-failed-auth": "1", "rate-limit-failed-auth-burst": "20",
		"audit-max-age": "2160h0m0s", "audit-max-records": "100000", "audit-export-dir": "", "http-idle-timeout": "2m0s", "oidc-jwks-refresh": "30s",
	} {
		require.Equal(t, want, cmd.Flags().Lookup(flag).DefValue, flag)
	}
	t.Setenv("OCE_DATA_DIR", "/var/lib/oce")
	t.Setenv("OCE_RAFT_ADDR", "10.0.0.1:7300")
	t.Setenv("OCE_HTTP_ADDR", "10.0.0.1:7400")
	t.Setenv("OCE_NODE_ID", "c-0")
	t.Setenv("OCE_JOIN", "c-0.oce:7400")
	cmd = command()
	for flag, want := range map[string]string{
		"data-dir": "/var/lib/oce", "raft-addr": "10.0.0.1:7300", "http-addr": "10.0.0.1:7400", "node-id": "c-0", "join": "c-0.oce:7400",
	} {
		require.Equal(t, want, cmd.Flags().Lookup(flag).DefValue, flag)
	}
	cmd.SetArgs([]string{"extra"})
	require.Error(t, cmd.Execute(), "positional arguments are refused")
}
